// tandem-serve's Slurm launcher (`--launcher slurm`, issue 51 item 3): a job becomes a Slurm batch
// job. sbatch gets the job's ranks (--ntasks), the server's partition, time limit and GPUs per node;
// the batch script only `exec "$@"`s its arguments, `tandem-serve __supervise EXIT_FILE srun
// --mpi=PLUGIN tandem-train ...`, so that no word of a request is ever read by a shell, and the
// supervisor writes exit.json into the job's folder as it does for local jobs. The job's state comes
// from `scontrol show job` (then sacct, where accounting is configured), its end from exit.json;
// a cancel is `scancel --signal=TERM` (the job's steps, i.e. the ranks, not the batch script), then
// `scancel` after the grace period. Every Slurm command runs from an argv, never through a shell.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tandem::serve {

struct SlurmOptions {
  std::string partition;         // empty: the cluster's default partition
  std::string time_limit;        // sbatch --time; empty: the partition's default
  int gpus_per_node = 0;         // sbatch --gpus-per-node; 0: none asked for
  std::string mpi = "pmix";      // srun --mpi: how the ranks meet (Open MPI: pmix; MPICH: pmi2)
  double command_timeout_s = 30;  // a Slurm command that takes longer is killed (a controller down)
};

// Checks the server's Slurm settings (ConfigError naming the flag): a partition is names of
// [A-Za-z0-9_.-] separated by commas; a time limit is Slurm's [D-]HH[:MM[:SS]], minutes or
// UNLIMITED/INFINITE; the srun MPI plugin a plain word; GPUs >= 0.
void validate_slurm_options(const SlurmOptions& o);

// The path of a Slurm command (`sbatch`, ...) in PATH; empty when not found.
std::string slurm_command(const std::string& name);

// At the server's start: every Slurm command it runs is in PATH, the controller answers, and the
// partition (when given) exists. ValueError saying which is missing, with Slurm's own message.
void check_slurm_reachable(const SlurmOptions& o);

// What sbatch runs: the fixed script (kSlurmBatchScript's text) with the command as its arguments.
extern const char* const kSlurmBatchScript;

// sbatch's argv for a job: options, the script, then `command` as the script's arguments.
struct SlurmSubmission {
  std::string job_name;  // tandem-serve-<id>
  int ranks = 1;
  std::string job_dir;   // the batch step's working folder
  std::string log_path;  // the batch step's stdout and stderr (appended)
  std::string script_path;
  std::vector<std::string> command;
};
std::vector<std::string> sbatch_argv(const SlurmOptions& o, const SlurmSubmission& s);

// srun's part of a job's command: srun --mpi=PLUGIN --kill-on-bad-exit=1 (one rank failing ends
// the step, as under mpirun); the program and its flags follow.
std::vector<std::string> srun_prefix(const SlurmOptions& o);

// Submits; returns Slurm's job id. IOError with sbatch's own message when it refuses.
std::string slurm_submit(const SlurmOptions& o, const SlurmSubmission& s);

// What Slurm says of a job.
struct SlurmJobInfo {
  enum class Known { Yes, No, Unreachable } known = Known::Unreachable;  // No: Slurm has no such job (any more)
  std::string state;      // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;     // Slurm's Reason= (why it is pending), "None" when none
  std::string exit_code;  // "0:0" (code:signal)
  std::string nodes;      // NodeList=
  std::string error;      // when Unreachable: the command's message
};
// scontrol show job, then sacct for a job scontrol no longer knows (purged after MinJobAge) where
// accounting is on.
SlurmJobInfo slurm_query(const SlurmOptions& o, const std::string& job_id);
// Parses `scontrol -o show job` output (one line of Key=Value fields).
SlurmJobInfo parse_scontrol_job(const std::string& text);

bool slurm_state_pending(const std::string& state);  // not started yet (PENDING, CONFIGURING, ...)
bool slurm_state_final(const std::string& state);    // ended (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...)

// scancel: with `term_steps`, SIGTERM to the job's steps (its ranks; the batch script and the
// supervisor in it are left to record the end); else the job cancelled outright (Slurm's SIGTERM to
// everything, SIGKILL after its KillWait). Returns scancel's message on failure, empty on success.
std::string slurm_cancel(const SlurmOptions& o, const std::string& job_id, bool term_steps);

}  // namespace tandem::serve
