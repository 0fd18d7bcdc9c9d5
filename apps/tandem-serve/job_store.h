// JobStore: the state directory. Layout:
//   <state>/token                       the generated bearer token (when no --token-file), mode 0600
//   <state>/jobs/<id>/job.json          the job's record (job.h), rewritten atomically on each change
//   <state>/jobs/<id>/metrics.jsonl     tandem-train's --metrics file
//   <state>/jobs/<id>/log.txt           mpirun's stdout and stderr
//   <state>/jobs/<id>/exit.json         written by the supervisor when the command ended (supervisor.h)
//   <state>/jobs/<id>/ranks/            each rank's stdout and stderr, as mpirun --output-filename lays them out
//   <state>/jobs/<id>/batch.sh          --launcher slurm: the script sbatch was given (slurm.h)
//   <state>/jobs/<id>/<save>            the job's checkpoints, when it has `save`
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/tandem-serve/job.h"
#include "apps/tandem-serve/job_files.h"

namespace tandem::serve {

// How the command ended, from exit.json.
struct ExitRecord {
  std::optional<int> exit_code, signal;
  double finished_at = 0;
};

// What the metrics file says so far.
struct MetricsSummary {
  // Steps done over the steps planned (a step record's total_steps), whatever the end: the done
  // record's steps when it is there (a stopped run ends short of 1), else the latest step record's;
  // 0 before the first step record.
  double progress = 0;
  nlohmann::json last_metrics;     // the latest step or epoch record (null: none yet)
  nlohmann::json result;           // the done record (null: none)
};

class JobStore {
 public:
  explicit JobStore(std::string state_dir);  // creates <state>/jobs

  const std::string& root() const { return root_; }
  std::string jobs_dir() const { return root_ + "/jobs"; }
  std::string job_dir(int64_t id) const { return jobs_dir() + "/" + std::to_string(id); }
  std::string record_path(int64_t id) const { return job_dir(id) + "/" + kJobRecordFile; }
  std::string metrics_path(int64_t id) const { return job_dir(id) + "/" + kJobMetricsFile; }
  std::string log_path(int64_t id) const { return job_dir(id) + "/" + kJobLogFile; }
  std::string exit_path(int64_t id) const { return job_dir(id) + "/" + kJobExitFile; }
  std::string ranks_dir(int64_t id) const { return job_dir(id) + "/" + kJobRanksDir; }
  std::string batch_script_path(int64_t id) const { return job_dir(id) + "/" + kJobBatchScript; }

  // Every job record found, by id; a malformed one is skipped with a line on stderr.
  std::vector<Job> load_all() const;
  void save(const Job& job) const;  // creates the job's folder; atomic
  std::optional<ExitRecord> read_exit(int64_t id) const;
  MetricsSummary summarize_metrics(int64_t id) const;
  // Why the job failed, at most `n` lines (job_errors.h): tandem-train's error lines of every rank
  // (from ranks/, the ranks named; from the log when there is no ranks/), and the ranks mpirun saw
  // killed by a signal, or, without any tandem-train line, the first rank's exit code. When none
  // of these is found and `log_tail`: the log's last `n` lines.
  std::vector<std::string> error_lines(int64_t id, size_t n, bool log_tail) const;
  // The job's live status endpoint, from the line tandem-train --status-port logs at start
  // ("status: http://127.0.0.1:PORT/status"); empty when there is none.
  std::string status_url(int64_t id) const;

 private:
  std::string root_;
};

// The last `max_bytes` of a file ("" when it cannot be read), cut to whole lines.
std::string read_tail(const std::string& path, size_t max_bytes);

}  // namespace tandem::serve
