// The Slurm launcher's commands (see slurm.h).
#include "apps/tandem-serve/slurm.h"

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "apps/tandem-serve/process.h"
#include "runtime/error.h"

namespace tandem::serve {

// The batch script: its arguments are the command, passed by sbatch as an argv; the shell expands
// nothing of them ("$@").
const char* const kSlurmBatchScript =
    "#!/bin/sh\n"
    "# tandem-serve's batch script: runs its arguments as they are (the job's supervisor, srun, tandem-train).\n"
    "exec \"$@\"\n";

void validate_slurm_options(const SlurmOptions& o) {
  static const std::regex partition(R"([A-Za-z0-9_.-]{1,64}(,[A-Za-z0-9_.-]{1,64})*)");
  static const std::regex time(R"(UNLIMITED|INFINITE|[0-9]{1,6}(-[0-9]{1,2})?(:[0-9]{1,2}){0,2})");
  static const std::regex word(R"([a-z0-9_]{1,32})");
  TANDEM_CHECK_KIND(Value, o.partition.empty() || std::regex_match(o.partition, partition),
                    "--slurm-partition '{}': expected partition names of letters, digits, '_', '.', '-', "
                    "separated by commas", o.partition);
  TANDEM_CHECK_KIND(Value, o.time_limit.empty() || std::regex_match(o.time_limit, time),
                    "--slurm-time-limit '{}': expected minutes, [D-]HH:MM[:SS], MM:SS, or UNLIMITED", o.time_limit);
  TANDEM_CHECK_KIND(Value, std::regex_match(o.mpi, word),
                    "--slurm-mpi '{}': expected srun's MPI plugin name (srun --mpi=list), e.g. pmix or pmi2", o.mpi);
  TANDEM_CHECK_KIND(Value, o.gpus_per_node >= 0, "--slurm-gpus-per-node {}: expected 0 or more", o.gpus_per_node);
}

std::string slurm_command(const std::string& name) { return find_executable(name); }

namespace {

std::string need_command(const std::string& name) {
  std::string path = slurm_command(name);
  TANDEM_CHECK_KIND(IO, !path.empty(), "Slurm's {} is not found in PATH (Debian: apt-get install slurm-client)", name);
  return path;
}

// A command's own words for a failure: its stderr, else its stdout, one line.
std::string message_of(const CommandResult& r, const std::string& name) {
  if (r.timed_out) return fmt::format("{} did not answer within its timeout (is slurmctld up?)", name);
  std::string m = r.err.empty() ? r.out : r.err;
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  for (char& c : m)
    if (c == '\n') c = ' ';
  return m.empty() ? fmt::format("{} exited with code {}", name, r.exit_code) : m;
}

}  // namespace

void check_slurm_reachable(const SlurmOptions& o) {
  for (const char* name : {"sbatch", "srun", "scontrol", "scancel"})
    TANDEM_CHECK(!slurm_command(name).empty(), "--launcher slurm: Slurm's {} is not in PATH (Debian: apt-get install "
                 "slurm-client; the server runs sbatch, srun, scontrol and scancel)", name);
  std::vector<std::string> argv{slurm_command("scontrol"), "-o", "show", "partition"};
  if (!o.partition.empty()) argv.push_back(o.partition.substr(0, o.partition.find(',')));
  const CommandResult r = run_command(argv, o.command_timeout_s);
  TANDEM_CHECK(r.exit_code == 0, "--launcher slurm: {} ({})", message_of(r, "scontrol show partition"),
               o.partition.empty() ? "asking for the cluster's partitions" : "--slurm-partition " + o.partition);
}

std::vector<std::string> sbatch_argv(const SlurmOptions& o, const SlurmSubmission& s) {
  std::vector<std::string> argv{need_command("sbatch"), "--parsable", "--job-name=" + s.job_name,
                                "--ntasks=" + std::to_string(s.ranks), "--chdir=" + s.job_dir,
                                "--output=" + s.log_path, "--open-mode=append", "--export=ALL"};
  if (!o.partition.empty()) argv.push_back("--partition=" + o.partition);
  if (!o.time_limit.empty()) argv.push_back("--time=" + o.time_limit);
  if (o.gpus_per_node > 0) argv.push_back("--gpus-per-node=" + std::to_string(o.gpus_per_node));
  argv.push_back(s.script_path);
  argv.insert(argv.end(), s.command.begin(), s.command.end());
  return argv;
}

std::vector<std::string> srun_prefix(const SlurmOptions& o) {
  return {need_command("srun"), "--mpi=" + o.mpi, "--kill-on-bad-exit=1"};
}

std::string slurm_submit(const SlurmOptions& o, const SlurmSubmission& s) {
  const CommandResult r = run_command(sbatch_argv(o, s), o.command_timeout_s);
  TANDEM_CHECK_KIND(IO, r.exit_code == 0, "sbatch refused the job: {}", message_of(r, "sbatch"));
  // --parsable: "ID" or "ID;CLUSTER".
  std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
  TANDEM_CHECK_KIND(IO, !id.empty() && id.find_first_not_of("0123456789") == std::string::npos,
                    "sbatch printed no job id: '{}'", r.out);
  return id;
}

SlurmJobInfo parse_scontrol_job(const std::string& text) {
  SlurmJobInfo info;
  info.known = SlurmJobInfo::Known::Yes;
  std::istringstream words(text);
  std::string w;
  while (words >> w) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
    if (key == "JobState") info.state = value;
    else if (key == "Reason") info.reason = value;
    else if (key == "ExitCode") info.exit_code = value;
    else if (key == "NodeList") info.nodes = value;
  }
  if (info.state.empty()) info.known = SlurmJobInfo::Known::Unreachable, info.error = "no JobState in: " + text;
  return info;
}

SlurmJobInfo slurm_query(const SlurmOptions& o, const std::string& job_id) {
  SlurmJobInfo info;
  const CommandResult r = run_command({need_command("scontrol"), "-o", "show", "job", job_id}, o.command_timeout_s);
  if (r.exit_code == 0) return parse_scontrol_job(r.out);
  const std::string msg = message_of(r, "scontrol");
  if (msg.find("Invalid job id") == std::string::npos) {
    info.error = msg;
    return info;  // Unreachable: the controller did not answer; nothing is concluded
  }
  // Purged from the controller (MinJobAge after its end): the accounting database, where there is one.
  info.known = SlurmJobInfo::Known::No;
  const std::string sacct = slurm_command("sacct");
  if (sacct.empty()) return info;
  const CommandResult a = run_command({sacct, "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode,NodeList"},
                                      o.command_timeout_s);
  std::string line = a.out.substr(0, a.out.find('\n'));
  if (a.exit_code != 0 || line.empty()) return info;  // no accounting storage: Slurm no longer knows it
  std::istringstream fields(line);
  std::getline(fields, info.state, '|');
  std::getline(fields, info.exit_code, '|');
  std::getline(fields, info.nodes, '|');
  info.state = info.state.substr(0, info.state.find(' '));  // "CANCELLED by 0"
  info.known = SlurmJobInfo::Known::Yes;
  return info;
}

bool slurm_state_pending(const std::string& s) {
  return s == "PENDING" || s == "CONFIGURING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED" ||
         s == "RESV_DEL_HOLD" || s == "SPECIAL_EXIT";
}

bool slurm_state_final(const std::string& s) {
  return s == "COMPLETED" || s == "FAILED" || s == "CANCELLED" || s == "TIMEOUT" || s == "NODE_FAIL" ||
         s == "PREEMPTED" || s == "OUT_OF_MEMORY" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "REVOKED";
}

std::string slurm_cancel(const SlurmOptions& o, const std::string& job_id, bool term_steps) {
  std::vector<std::string> argv{need_command("scancel")};
  if (term_steps) argv.push_back("--signal=TERM");
  argv.push_back(job_id);
  const CommandResult r = run_command(argv, o.command_timeout_s);
  return r.exit_code == 0 ? "" : message_of(r, "scancel");
}

}  // namespace tandem::serve
