// The MPI launcher's flavor and flags (see launcher.h).
#include "apps/tandem-serve/launcher.h"

#include <cstdio>

#include "runtime/error.h"

namespace tandem::serve {

const char* flavor_name(LauncherFlavor f) { return f == LauncherFlavor::MPICH ? "mpich" : "openmpi"; }

LauncherFlavor parse_flavor(const std::string& name) {
  if (name == "openmpi") return LauncherFlavor::OpenMPI;
  if (name == "mpich") return LauncherFlavor::MPICH;
  TANDEM_FAIL(Value, "--mpi-flavor {}: expected auto, openmpi or mpich", name);
}

bool flavor_from_version(const std::string& text, LauncherFlavor* out) {
  const auto has = [&](const char* s) { return text.find(s) != std::string::npos; };
  if (has("Open MPI") || has("OpenRTE")) {
    *out = LauncherFlavor::OpenMPI;
    return true;
  }
  if (has("HYDRA") || has("MPICH") || has("Intel(R) MPI") || has("MVAPICH")) {
    *out = LauncherFlavor::MPICH;
    return true;
  }
  return false;
}

LauncherFlavor detect_flavor(const std::string& launcher, std::string* why) {
  // The path single-quoted for the shell (an absolute path from find_executable; a quote in it is
  // closed, escaped and reopened). stdin from /dev/null: a launcher never waits on it.
  std::string quoted = "'";
  for (char c : launcher) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::string text;
  if (FILE* p = ::popen((quoted + " --version </dev/null 2>&1").c_str(), "r")) {
    char buf[512];
    while (text.size() < 64 * 1024 && std::fgets(buf, sizeof buf, p)) text += buf;
    ::pclose(p);
  }
  LauncherFlavor f = LauncherFlavor::OpenMPI;
  if (flavor_from_version(text, &f)) {
    *why = std::string(flavor_name(f)) + ", from its --version";
  } else {
    *why = "openmpi (its --version names neither Open MPI nor MPICH/Hydra; --mpi-flavor sets it)";
  }
  return f;
}

std::vector<std::string> launch_prefix(LauncherFlavor f, const std::string& launcher, int ranks,
                                       const std::string& ranks_dir) {
  std::vector<std::string> argv{launcher, "-np", std::to_string(ranks)};
  if (f == LauncherFlavor::OpenMPI) {
    for (const char* a : {"--bind-to", "none", "--oversubscribe", "--output-filename"}) argv.emplace_back(a);
    argv.push_back(ranks_dir);
  }
  return argv;
}

}  // namespace tandem::serve
