// Job: one training job's record, as kept in <state-dir>/jobs/<id>/job.json.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::serve {

enum class JobState { Queued, Running, Done, Failed, Cancelled, Lost };
inline constexpr JobState kAllStates[] = {JobState::Queued, JobState::Running,   JobState::Done,
                                          JobState::Failed, JobState::Cancelled, JobState::Lost};

const char* state_name(JobState s);
JobState parse_state(const std::string& s);  // ValueError on an unknown name
inline bool is_final(JobState s) { return s != JobState::Queued && s != JobState::Running; }

struct Job {
  int64_t id = 0;
  JobState state = JobState::Queued;
  nlohmann::json request = nlohmann::json::object();  // as validated (job_schema.h)
  int ranks = 1;
  std::vector<std::string> argv;  // the job's command: mpirun -np R ... tandem-train ... (slurm: sbatch ...)
  int pid = 0;                     // the supervisor (= process group = session id); 0: not started
  std::string slurm_job_id;        // --launcher slurm: Slurm's id once sbatch took the job; empty otherwise
  std::optional<int> exit_code;    // the command's exit code
  std::optional<int> signal;       // or the signal that killed it
  double created_at = 0, started_at = 0, finished_at = 0;  // Unix time; 0: not yet
  bool cancel_requested = false;
  double cancel_at = 0;  // when the SIGTERM went out
  std::string reason;    // why the job is in its state, in words

  std::string id_str() const { return std::to_string(id); }
};

nlohmann::json to_json(const Job& j);
Job job_from_json(const nlohmann::json& j);  // nlohmann's exceptions on a malformed record

double unix_now();

}  // namespace tandem::serve
