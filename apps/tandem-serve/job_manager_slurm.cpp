// JobManager under --launcher slurm (see job_manager.h, slurm.h): a job is sbatch'ed as soon as it
// is submitted, followed through `scontrol show job` while Slurm holds it, and ended by the exit
// record its batch script's supervisor writes into the (shared) state directory.
#include <fmt/format.h>

#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/job_manager.h"
#include "apps/tandem-serve/supervisor.h"
#include "runtime/serialization/atomic_file.h"

namespace tandem::serve {

namespace {

// How long a job Slurm says has ended may go without its exit record before it is taken as gone: a
// shared filesystem (NFS attribute caching) can show a file written on a node a few seconds late.
constexpr double kExitRecordWait_s = 10;

}  // namespace

void JobManager::launch_slurm(Job& j, double now) {
  try {
    // In the batch step: tandem-serve __supervise EXIT_FILE srun --mpi=... tandem-train --flag=value ...
    std::vector<std::string> command{opt_.self_exe, kSuperviseArg, store_.exit_path(j.id)};
    for (auto& a : srun_prefix(*opt_.slurm)) command.push_back(std::move(a));
    for (auto& a : train_command(j)) command.push_back(std::move(a));
    serialization::make_directories(store_.job_dir(j.id));
    serialization::write_file_atomic(store_.batch_script_path(j.id), kSlurmBatchScript);
    SlurmSubmission sub{"tandem-serve-" + j.id_str(), j.ranks,           store_.job_dir(j.id),
                        store_.log_path(j.id),          store_.batch_script_path(j.id), std::move(command)};
    j.argv = sbatch_argv(*opt_.slurm, sub);
    j.slurm_job_id = slurm_submit(*opt_.slurm, sub);
    j.reason = fmt::format("submitted to Slurm as job {}", j.slurm_job_id);
  } catch (const std::exception& e) {
    fail_to_start(j, now, e);
  }
  store_.save(j);
}

void JobManager::refresh_slurm(std::unique_lock<std::mutex>& lock) {
  std::vector<std::pair<int64_t, std::string>> asked;
  for (const auto& [id, j] : jobs_)
    if (!j.slurm_job_id.empty() && !is_final(j.state)) asked.emplace_back(id, j.slurm_job_id);
  // Slurm's commands can take seconds (a busy or unreachable controller): HTTP calls go on meanwhile.
  lock.unlock();
  std::vector<SlurmJobInfo> answers;
  for (const auto& [id, slurm_id] : asked) answers.push_back(slurm_query(*opt_.slurm, slurm_id));
  lock.lock();
  for (size_t i = 0; i < asked.size(); ++i) slurm_info_[asked[i].first] = answers[i];
  slurm_polled_at_ = unix_now();
}

void JobManager::follow_slurm(Job& j, double now) {
  const auto it = slurm_info_.find(j.id);
  if (it == slurm_info_.end()) return;  // not asked yet
  const SlurmJobInfo& info = it->second;
  const JobState state_before = j.state;
  const std::string reason_before = j.reason;
  const std::string where = fmt::format("Slurm job {}", j.slurm_job_id);
  // The command ended: its exit record says how, whatever Slurm's state (it may still say COMPLETING).
  if (store_.read_exit(j.id)) {
    if (j.started_at == 0) j.started_at = now;
    finalize(j, now);
    if (info.state == "TIMEOUT" && j.state == JobState::Done) {
      // Slurm's SIGTERM at the time limit: tandem-train stopped (and with `save` checkpointed) short of
      // its plan and exited 0. Not done: failed, saying why.
      --finished_[j.state];
      j.state = JobState::Failed;
      ++finished_[j.state];
      j.reason = fmt::format("stopped by Slurm's time limit ({} TIMEOUT; --slurm-time-limit): tandem-train "
                             "stopped at a step boundary, checkpointing with `save`, and {}", where, j.reason);
    } else if (info.state == "TIMEOUT") {
      j.reason += fmt::format(" ({} reached its time limit)", where);
    }
    if (j.reason != reason_before) store_.save(j);
    slurm_info_.erase(j.id);
    return;
  }
  // A cancel's grace is over and the ranks still run (or a pending job's scancel failed): cancel outright.
  const auto kill_after_grace = [&] {
    if (!j.cancel_requested || now - j.cancel_at <= opt_.cancel_grace_s || slurm_killed_.count(j.id)) return;
    const std::string err = slurm_cancel(*opt_.slurm, j.slurm_job_id, /*term_steps=*/false);
    slurm_killed_.insert(j.id);
    j.reason = err.empty() ? fmt::format("cancelling: {} cancelled outright after the {} s grace", where,
                                         opt_.cancel_grace_s)
                           : fmt::format("cancelling: scancel {} failed: {}", j.slurm_job_id, err);
  };
  if (info.known == SlurmJobInfo::Known::Unreachable) {
    j.reason = fmt::format("{}: Slurm does not answer ({}); its last state is kept", where, info.error);
  } else if (info.known == SlurmJobInfo::Known::Yes && slurm_state_pending(info.state)) {
    if (!j.cancel_requested) j.reason = fmt::format("{} is {} in Slurm ({})", where, info.state, info.reason);
    kill_after_grace();
  } else if (info.known == SlurmJobInfo::Known::Yes && !slurm_state_final(info.state)) {
    if (j.state == JobState::Queued) {
      j.state = JobState::Running;
      j.started_at = now;
      ++started_;
    }
    if (!j.cancel_requested) j.reason = fmt::format("{} is {} on {}", where, info.state, info.nodes);
    kill_after_grace();
  } else {
    // Ended (or gone from Slurm) without an exit record: wait a little for a late shared filesystem.
    // (A job cancelled before it was ever seen running has no record to wait for.)
    const bool never_ran = j.started_at == 0;
    const auto seen = slurm_ended_at_.emplace(j.id, now).first;
    if (!(never_ran && info.state == "CANCELLED") && now - seen->second < kExitRecordWait_s) return;
    j.finished_at = now;
    if (j.cancel_requested || info.state == "CANCELLED") {
      j.state = JobState::Cancelled;
      j.reason = never_ran ? fmt::format("cancelled while pending in Slurm ({})", where)
                           : fmt::format("cancelled; {} was killed after the grace period", where);
    } else if (info.known == SlurmJobInfo::Known::No) {
      j.state = JobState::Lost;
      j.reason = fmt::format("Slurm no longer knows {} (purged, and no accounting storage to ask) and it left no "
                             "exit record in {}", where, store_.job_dir(j.id));
    } else {
      j.state = JobState::Failed;
      // The usual cause: the batch step could not write into the job's folder on its node.
      j.reason = fmt::format("{} ended {} (exit code {}, on {}) without the exit record its batch script writes "
                             "into {}: the state directory must be shared with the Slurm nodes (the same path "
                             "on each), as must tandem-serve and tandem-train; see the job's log and slurmd's log "
                             "there",
                             where, info.state, info.exit_code.empty() ? "?" : info.exit_code,
                             info.nodes.empty() ? "no node" : info.nodes, store_.job_dir(j.id));
    }
    ++finished_[j.state];
    slurm_info_.erase(j.id);
    slurm_ended_at_.erase(j.id);
  }
  if (j.state != state_before || j.reason != reason_before) store_.save(j);
}

void JobManager::cancel_slurm(Job& j, double now) {
  if (!opt_.slurm)
    throw HttpError(409, fmt::format("job {} is Slurm job {}, and this server runs --launcher local: cancel it with "
                                     "scancel {}", j.id, j.slurm_job_id, j.slurm_job_id));
  if (j.cancel_requested) return;
  j.cancel_requested = true;
  j.cancel_at = now;
  // Running: SIGTERM to the job's steps, i.e. to the ranks (tandem-train stops at a step boundary
  // and checkpoints); the batch script and its supervisor are not signalled and record the end.
  // Pending: nothing runs, the job is cancelled outright.
  const bool running = j.state == JobState::Running;
  const std::string err = slurm_cancel(*opt_.slurm, j.slurm_job_id, /*term_steps=*/running);
  if (!err.empty()) {
    j.reason = fmt::format("cancelling: scancel {} failed: {}; tried again after {} s", j.slurm_job_id, err,
                           opt_.cancel_grace_s);
  } else if (running) {
    j.reason = fmt::format("cancelling: scancel --signal=TERM {} sent to its ranks; scancel after {} s",
                           j.slurm_job_id, opt_.cancel_grace_s);
  } else {
    slurm_killed_.insert(j.id);
    j.reason = fmt::format("cancelling: scancel {} (pending in Slurm)", j.slurm_job_id);
  }
}

}  // namespace tandem::serve
