// tandem-train's thread count (apps/common/threads.h).
#include "apps/common/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "comm/communicator.h"

namespace tandem::app {

int threads_per_rank(int usable_cpus, int node_cpus, int local_ranks) {
  return std::max(1, std::min(usable_cpus, node_cpus / std::max(1, local_ranks)));
}

ThreadChoice apply_threads(int threads) {
  ThreadChoice c;
  if (threads > 0) {
    omp_set_num_threads(threads);
    c.reason = "--threads";
  } else if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    c.reason = "OMP_NUM_THREADS";
  } else if (const int local = comm::launcher_local_size(); local > 1) {
    const int usable = omp_get_num_procs(), node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    omp_set_num_threads(threads_per_rank(usable, node, local));
    c.reason = fmt::format("{} CPUs on the node shared by its {} ranks, {} usable by this one", node, local, usable);
  } else {
    c.reason = "OpenMP's default: the CPUs this process may use";
  }
  c.count = omp_get_max_threads();
  return c;
}

}  // namespace tandem::app
