// The MPI launcher that starts tandem-serve's jobs and the flags it takes: Open MPI's mpirun and
// MPICH's Hydra mpiexec (MPICH, MVAPICH, Intel MPI) share -np and little else (issue 51 item 5).
#pragma once
#include <string>
#include <vector>

namespace tandem::serve {

enum class LauncherFlavor { OpenMPI, MPICH };

const char* flavor_name(LauncherFlavor f);  // "openmpi", "mpich"

// --mpi-flavor's value: "openmpi" or "mpich" (ConfigError otherwise); "auto" is detect_flavor's.
LauncherFlavor parse_flavor(const std::string& name);

// What `LAUNCHER --version` printed says: Open MPI ("mpirun (Open MPI) 5.0.3", "(OpenRTE) 4.1.4"), or
// Hydra ("HYDRA build details", "Intel(R) MPI Library"). False when it names neither.
bool flavor_from_version(const std::string& version_text, LauncherFlavor* out);

// Runs `launcher --version` and reads it; a launcher that names neither (a stand-in such as
// /bin/true, a wrapper script) is taken for Open MPI, tandem-serve's default before launchers were
// told apart. `why` says which it was and how it was decided, for the server's start line.
LauncherFlavor detect_flavor(const std::string& launcher, std::string* why);

// The job's command up to tandem-train: the launcher, its rank count and the flavor's flags.
//   Open MPI: --bind-to none (its default pins every job's rank 0 on core 0), --oversubscribe (the
//             queue, not mpirun, decides how many ranks run), --output-filename RANKS_DIR (each
//             rank's stdout and stderr in a file of its own as well as in the log).
//   MPICH:    nothing more: Hydra neither binds nor limits ranks to cores by default, and it has no
//             per-rank copy beside the log (-outfile-pattern moves the output out of the log): a
//             failed job's errors are then read from the log.
std::vector<std::string> launch_prefix(LauncherFlavor f, const std::string& launcher, int ranks,
                                       const std::string& ranks_dir);

}  // namespace tandem::serve
