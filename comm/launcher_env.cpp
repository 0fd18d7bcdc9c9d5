// The launcher's view of the job from the environment (see launcher_env.h).
#include "comm/launcher_env.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

namespace tandem::comm {

namespace {
// The first of `names` that is set and non-empty, as an int; nullopt-like `found` false otherwise.
bool first_int(const EnvLookup& getenv, std::initializer_list<const char*> names, int* out, const char** which) {
  for (const char* name : names) {
    if (!name) continue;
    if (const char* v = getenv(name); v && *v) {
      *out = std::atoi(v);
      if (which) *which = name;
      return true;
    }
  }
  return false;
}
}  // namespace

int slurm_tasks_on_node(const std::string& spec, int node) {
  // Entries "N" or "N(xM)", comma-separated, cover the nodes in order.
  int first = 0;
  size_t pos = 0;
  while (pos < spec.size() && node >= 0) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string entry = spec.substr(pos, end - pos);
    char* rest = nullptr;
    const long tasks = std::strtol(entry.c_str(), &rest, 10);
    if (rest == entry.c_str() || tasks < 0) return 0;
    long repeat = 1;
    if (*rest == '(') {
      if (rest[1] != 'x') return 0;
      char* close = nullptr;
      repeat = std::strtol(rest + 2, &close, 10);
      if (close == rest + 2 || *close != ')' || close[1] != '\0' || repeat < 1) return 0;
    } else if (*rest != '\0') {
      return 0;
    }
    if (node < first + repeat) return static_cast<int>(tasks);
    first += static_cast<int>(repeat);
    pos = end + 1;
  }
  return 0;
}

LauncherEnv read_launcher_env(const EnvLookup& getenv) {
  LauncherEnv e;
  const bool srun = [&] {
    const char* v = getenv("SLURM_STEP_NUM_TASKS");
    return v && *v;
  }();
  // Slurm's names only inside an srun step; nullptr entries are skipped.
  const auto slurm = [&](const char* name) -> const char* { return srun ? name : nullptr; };
  const char* which = nullptr;
  if (first_int(getenv, {"OMPI_COMM_WORLD_RANK", "PMI_RANK", slurm("SLURM_PROCID"), "PMIX_RANK"}, &e.rank, &which)) {
    const std::string w = which;
    e.launcher = w.rfind("OMPI_", 0) == 0 ? "openmpi" : w.rfind("PMI_", 0) == 0 ? "pmi"
                 : w.rfind("SLURM_", 0) == 0 ? "slurm" : "pmix";
  }
  first_int(getenv, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", slurm("SLURM_STEP_NUM_TASKS"), "PMIX_SIZE"}, &e.world_size,
            nullptr);
  first_int(getenv, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", slurm("SLURM_LOCALID")}, &e.local_rank, nullptr);
  first_int(getenv, {slurm("SLURM_NODEID")}, &e.node, nullptr);
  if (!first_int(getenv, {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, &e.local_size, nullptr) && srun) {
    const char* per_node = getenv("SLURM_STEP_TASKS_PER_NODE");
    if (per_node && e.node >= 0) e.local_size = slurm_tasks_on_node(per_node, e.node);
  }
  e.world_size = std::max(1, e.world_size);
  e.local_size = std::max(1, e.local_size);
  e.rank = std::max(0, e.rank);
  e.local_rank = std::max(0, e.local_rank);
  e.node = std::max(-1, e.node);
  return e;
}

LauncherEnv launcher_env() {
  return read_launcher_env([](const char* name) { return std::getenv(name); });
}

}  // namespace tandem::comm
