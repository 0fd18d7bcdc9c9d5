// JobManager: the jobs, their FIFO queue over the server's slots, launching, watching and
// cancelling them, and taking them back after a restart. One mutex guards all; a watcher thread
// polls running jobs every poll_s and starts queued ones as slots free up. Under --launcher slurm
// every job goes to sbatch at once and Slurm queues it; the watcher follows it through scontrol
// (job_manager_slurm.cpp), asking Slurm with the mutex released.
#pragma once
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "apps/tandem-serve/job.h"
#include "apps/tandem-serve/job_paths.h"
#include "apps/tandem-serve/job_store.h"
#include "apps/tandem-serve/launcher.h"
#include "apps/tandem-serve/slurm.h"

namespace tandem::serve {

struct ManagerOptions {
  std::string mpirun;        // absolute paths
  LauncherFlavor flavor = LauncherFlavor::OpenMPI;  // mpirun's flags (launcher.h)
  std::string tandem_train;
  std::string self_exe;      // tandem-serve, re-executed as the job's supervisor
  int slots = 1;             // ranks that may run at once
  double cancel_grace_s = 10;
  double poll_s = 0.25;
  FileRoots roots;           // where a job's model and array files are read from (job_paths.h)
  // --launcher slurm: jobs are Slurm batch jobs (slurm.h), queued by Slurm rather than by slots;
  // unset: --launcher local, jobs run here under mpirun.
  std::optional<SlurmOptions> slurm;
  double slurm_poll_s = 1;   // how often Slurm is asked about its jobs
};

struct ManagerStats {
  std::map<JobState, int> by_state;
  int64_t submitted = 0, started = 0;      // since this server started
  std::map<JobState, int64_t> finished;    // since this server started, by final state
  int slots = 0, slots_used = 0;
};

class JobManager {
 public:
  JobManager(ManagerOptions opt, JobStore& store);
  ~JobManager();

  // Reloads the state directory (running jobs are taken back or found finished or lost) and
  // starts the watcher.
  void start();
  void stop();

  // Queues a validated request (job_schema.h); returns the new job. HttpError(400) when a file it
  // names is not one of the server's (resolve_job_files): such a job is never queued.
  Job submit(const nlohmann::json& request);
  // A queued job is cancelled at once; a running one gets SIGTERM (its ranks), then SIGKILL (its
  // whole session) after cancel_grace_s. HttpError 404 (no such job) or 409 (already final).
  Job cancel(int64_t id);
  std::optional<Job> get(int64_t id) const;
  std::vector<Job> list() const;
  ManagerStats stats() const;
  const JobStore& store() const { return store_; }
  int slots() const { return opt_.slots; }

 private:
  void watch_loop();
  void poll_locked(double now);
  // Whether the job's supervisor or any process of its session still runs.
  bool still_running(Job& j);
  void finalize(Job& j, double now);
  void launch(Job& j, double now);
  // A job whose launch threw: failed, saying why.
  void fail_to_start(Job& j, double now, const std::exception& e);
  std::vector<std::string> command(const Job& j) const;
  std::vector<std::string> train_command(const Job& j) const;  // tandem-train and its flags
  // --launcher slurm (job_manager_slurm.cpp)
  void launch_slurm(Job& j, double now);
  void refresh_slurm(std::unique_lock<std::mutex>& lock);  // asks Slurm about every job not final, unlocked
  void follow_slurm(Job& j, double now);
  void cancel_slurm(Job& j, double now);
  void terminate_ranks(const Job& j);
  int slots_used_locked() const;
  std::string supervisor_marker(const Job& j) const;

  ManagerOptions opt_;
  JobStore& store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Job> jobs_;
  std::set<int> children_;  // supervisors this server started: reaped with waitpid
  int64_t next_id_ = 1;
  int64_t submitted_ = 0, started_ = 0;
  std::map<JobState, int64_t> finished_;
  bool stopping_ = false;
  std::map<int64_t, SlurmJobInfo> slurm_info_;  // the latest answers, by job id
  std::map<int64_t, double> slurm_ended_at_;    // when Slurm was first seen saying the job ended
  std::set<int64_t> slurm_killed_;              // cancelled outright after the grace period
  double slurm_polled_at_ = 0;
  std::thread watcher_;
};

}  // namespace tandem::serve
