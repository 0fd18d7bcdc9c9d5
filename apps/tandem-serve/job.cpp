// Job records to and from JSON.
#include "apps/tandem-serve/job.h"

#include <chrono>

#include "apps/common/monitor_json.h"
#include "runtime/error.h"
#include "runtime/serialization/json_integer.h"

namespace tandem::serve {

const char* state_name(JobState s) {
  switch (s) {
    case JobState::Queued: return "queued";
    case JobState::Running: return "running";
    case JobState::Done: return "done";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::Lost: return "lost";
  }
  return "?";
}

JobState parse_state(const std::string& s) {
  for (JobState st : kAllStates)
    if (s == state_name(st)) return st;
  TANDEM_FAIL(Value, "unknown job state '{}'", s);
}

namespace {

nlohmann::json time_or_null(double t) { return t > 0 ? nlohmann::json(t) : nlohmann::json(); }
int int_field(const nlohmann::json& j, const char* key) {
  return serialization::json_integer<int>(j.at(key), fmt::format("job field \"{}\"", key));
}
std::optional<int> opt_int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return int_field(j, key);
}
double time_of(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

}  // namespace

nlohmann::json to_json(const Job& j) {
  return {{"id", j.id_str()},
          {"state", state_name(j.state)},
          {"request", j.request},
          {"ranks", j.ranks},
          {"argv", j.argv},
          {"pid", j.pid > 0 ? nlohmann::json(j.pid) : nlohmann::json()},
          {"slurm_job_id", j.slurm_job_id.empty() ? nlohmann::json() : nlohmann::json(j.slurm_job_id)},
          {"exit_code", monitor::json_or_null(j.exit_code)},
          {"signal", monitor::json_or_null(j.signal)},
          {"created_at", j.created_at},
          {"started_at", time_or_null(j.started_at)},
          {"finished_at", time_or_null(j.finished_at)},
          {"cancel_requested", j.cancel_requested},
          {"cancel_at", time_or_null(j.cancel_at)},
          {"reason", j.reason}};
}

Job job_from_json(const nlohmann::json& j) {
  Job job;
  job.id = std::stoll(j.at("id").get<std::string>());
  job.state = parse_state(j.at("state").get<std::string>());
  job.request = j.at("request");
  job.ranks = int_field(j, "ranks");
  job.argv = j.at("argv").get<std::vector<std::string>>();
  job.pid = opt_int(j, "pid").value_or(0);
  if (j.contains("slurm_job_id") && j["slurm_job_id"].is_string()) job.slurm_job_id = j["slurm_job_id"].get<std::string>();
  job.exit_code = opt_int(j, "exit_code");
  job.signal = opt_int(j, "signal");
  job.created_at = time_of(j, "created_at");
  job.started_at = time_of(j, "started_at");
  job.finished_at = time_of(j, "finished_at");
  job.cancel_requested = j.value("cancel_requested", false);
  job.cancel_at = time_of(j, "cancel_at");
  job.reason = j.value("reason", "");
  return job;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tandem::serve
