// The job queue, launcher and watcher (see job_manager.h).
#include "apps/tandem-serve/job_manager.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/job_schema.h"
#include "apps/tandem-serve/process.h"
#include "apps/tandem-serve/supervisor.h"

namespace tandem::serve {

JobManager::JobManager(ManagerOptions opt, JobStore& store) : opt_(std::move(opt)), store_(store) {}

JobManager::~JobManager() { stop(); }

std::string JobManager::supervisor_marker(const Job& j) const { return store_.exit_path(j.id); }

void JobManager::start() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = unix_now();
  for (Job& j : store_.load_all()) {
    next_id_ = std::max(next_id_, j.id + 1);
    auto& slot = jobs_[j.id] = std::move(j);
    if (!slot.slurm_job_id.empty()) {
      if (!is_final(slot.state))
        std::fprintf(stderr, "tandem-serve: job %lld (Slurm job %s) %s\n", static_cast<long long>(slot.id),
                     slot.slurm_job_id.c_str(),
                     opt_.slurm ? "followed through Slurm again"
                                : "is not followed: this server runs --launcher local (squeue, scancel)");
      continue;
    }
    if (slot.state != JobState::Running) continue;
    if (still_running(slot)) {
      std::fprintf(stderr, "tandem-serve: job %lld (pid %d) still runs: taken back\n",
                   static_cast<long long>(slot.id), slot.pid);
    } else {
      finalize(slot, now);
      std::fprintf(stderr, "tandem-serve: job %lld ended while the server was down: %s\n",
                   static_cast<long long>(slot.id), state_name(slot.state));
    }
  }
  watcher_ = std::thread([this] { watch_loop(); });
}

void JobManager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // Running jobs keep running: a restarted server takes them back.
}

Job JobManager::submit(const nlohmann::json& request) {
  resolve_job_files(request, opt_.roots);  // refused here, before the job has an id (launch resolves again)
  std::lock_guard<std::mutex> lock(mu_);
  Job j;
  j.id = next_id_++;
  j.request = request;
  j.ranks = request.at("ranks").get<int>();
  j.created_at = unix_now();
  j.reason = "waiting for free slots";
  store_.save(j);
  jobs_[j.id] = j;
  ++submitted_;
  cv_.notify_all();
  return j;
}

Job JobManager::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) throw HttpError(404, fmt::format("no job {}", id));
  Job& j = it->second;
  if (is_final(j.state)) throw HttpError(409, fmt::format("job {} is already {}", id, state_name(j.state)));
  const double now = unix_now();
  if (j.state == JobState::Queued && j.slurm_job_id.empty()) {
    j.state = JobState::Cancelled;
    j.finished_at = now;
    j.reason = "cancelled while queued";
    ++finished_[j.state];
  } else if (!j.slurm_job_id.empty()) {
    cancel_slurm(j, now);
  } else if (!j.cancel_requested) {
    j.cancel_requested = true;
    j.cancel_at = now;
    j.reason = fmt::format("cancelling: SIGTERM sent, SIGKILL after {} s", opt_.cancel_grace_s);
    terminate_ranks(j);
  }
  store_.save(j);
  cv_.notify_all();
  return j;
}

std::optional<Job> JobManager::get(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::vector<Job> JobManager::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Job> out;
  for (const auto& [id, j] : jobs_) out.push_back(j);
  return out;
}

ManagerStats JobManager::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ManagerStats s;
  for (JobState st : kAllStates) s.by_state[st] = 0;
  for (const auto& [id, j] : jobs_) ++s.by_state[j.state];
  s.submitted = submitted_;
  s.started = started_;
  s.finished = finished_;
  s.slots = opt_.slots;
  s.slots_used = slots_used_locked();
  return s;
}

int JobManager::slots_used_locked() const {
  int used = 0;
  for (const auto& [id, j] : jobs_)
    if (j.state == JobState::Running) used += j.ranks;
  return used;
}

void JobManager::watch_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (opt_.slurm && unix_now() - slurm_polled_at_ >= opt_.slurm_poll_s) refresh_slurm(lock);
    if (stopping_) break;
    poll_locked(unix_now());
    cv_.wait_for(lock, std::chrono::duration<double>(opt_.poll_s));
  }
}

void JobManager::poll_locked(double now) {
  for (auto& [id, j] : jobs_) {
    if (!j.slurm_job_id.empty()) {
      if (!is_final(j.state) && opt_.slurm) follow_slurm(j, now);
      continue;
    }
    if (j.state != JobState::Running) continue;
    if (!still_running(j)) {
      finalize(j, now);
    } else if (j.cancel_requested && now - j.cancel_at > opt_.cancel_grace_s) {
      std::vector<pid_t> all = session_pids(j.pid);
      all.push_back(j.pid);
      signal_all(all, SIGKILL);
    }
  }
  if (opt_.slurm) {  // Slurm queues them: each goes to sbatch at once
    for (auto& [id, j] : jobs_)
      if (j.state == JobState::Queued && j.slurm_job_id.empty()) launch_slurm(j, now);
    return;
  }
  // Strictly first come, first served: a big job at the head is not overtaken by small ones.
  for (auto& [id, j] : jobs_) {
    if (j.state != JobState::Queued) continue;
    if (slots_used_locked() + j.ranks > opt_.slots) break;
    launch(j, now);
  }
}

bool JobManager::still_running(Job& j) {
  bool supervisor = false;
  if (children_.count(j.pid)) {
    int status = 0;
    pid_t r = ::waitpid(j.pid, &status, WNOHANG);
    if (r == j.pid || (r < 0 && errno == ECHILD)) children_.erase(j.pid);
    else supervisor = true;
  } else {
    // Not our child (a restart took it back): alive while the pid is still our supervisor's.
    supervisor = process_matches(j.pid, supervisor_marker(j));
  }
  return supervisor || !session_pids(j.pid).empty();
}

void JobManager::finalize(Job& j, double now) {
  auto ex = store_.read_exit(j.id);
  if (ex) {
    j.exit_code = ex->exit_code;
    j.signal = ex->signal;
    j.finished_at = ex->finished_at > 0 ? ex->finished_at : now;
    const std::string how = ex->exit_code ? fmt::format("exited with code {}", *ex->exit_code)
                                          : fmt::format("killed by signal {}", ex->signal.value_or(0));
    if (j.cancel_requested) {
      j.state = JobState::Cancelled;
      j.reason = "cancelled; the job " + how;
    } else {
      j.state = ex->exit_code == 0 ? JobState::Done : JobState::Failed;
      j.reason = how;
    }
  } else {
    j.finished_at = now;
    if (j.cancel_requested) {
      j.state = JobState::Cancelled;
      j.reason = "cancelled; killed after the grace period";
    } else {
      j.state = JobState::Lost;
      j.reason = "its processes are gone without an exit record (killed while the server was down?)";
    }
  }
  ++finished_[j.state];
  store_.save(j);
}

// mpirun ... tandem-train ... for the job. Its files are resolved now, not at submission: the
// job may have waited in the queue while a file it names was replaced (by a symlink out of the
// folder, say), and a restarted server may have other folders or none.
std::vector<std::string> JobManager::command(const Job& j) const {
  // The launcher's flags by its flavor (launch_prefix: no pinning, no cap on ranks per core, each
  // rank's output in a file of its own under Open MPI so that errors are told by rank).
  std::vector<std::string> argv = launch_prefix(opt_.flavor, opt_.mpirun, j.ranks, store_.ranks_dir(j.id));
  for (auto& a : train_command(j)) argv.push_back(std::move(a));
  return argv;
}

std::vector<std::string> JobManager::train_command(const Job& j) const {
  const JobFiles files = resolve_job_files(j.request, opt_.roots);
  std::vector<std::string> argv{opt_.tandem_train};
  for (auto& a : JobSchema::train_args(j.request, files, store_.job_dir(j.id), store_.jobs_dir(),
                                       store_.metrics_path(j.id)))
    argv.push_back(std::move(a));
  return argv;
}

void JobManager::launch(Job& j, double now) {
  try {
    j.argv = command(j);
    std::vector<std::string> sup{opt_.self_exe, kSuperviseArg, store_.exit_path(j.id)};
    sup.insert(sup.end(), j.argv.begin(), j.argv.end());
    j.pid = spawn_in_session(sup, store_.log_path(j.id));
    children_.insert(j.pid);
    j.state = JobState::Running;
    j.started_at = now;
    j.reason = "running";
    ++started_;
  } catch (const std::exception& e) {
    fail_to_start(j, now, e);
  }
  store_.save(j);
}

void JobManager::fail_to_start(Job& j, double now, const std::exception& e) {
  j.state = JobState::Failed;
  j.finished_at = now;
  j.reason = std::string("could not start: ") + e.what();
  ++finished_[j.state];
}

void JobManager::terminate_ranks(const Job& j) {
  // The ranks first, so that they stop at a step boundary (and checkpoint); mpirun, on a SIGTERM of
  // its own, would SIGKILL them a moment later. A one-process command gets it itself.
  std::vector<pid_t> members = session_pids(j.pid), ranks, direct;
  for (pid_t p : members) {
    if (p == j.pid) continue;
    (parent_pid(p) == j.pid ? direct : ranks).push_back(p);
  }
  signal_all(ranks.empty() ? direct : ranks, SIGTERM);
}

}  // namespace tandem::serve
