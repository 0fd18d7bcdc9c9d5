#include "runtime/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

#include "runtime/error.h"

namespace tandem {
namespace {
std::atomic<bool> g_program_chose{false};
}  // namespace

void set_num_threads(int n) {
  TANDEM_CHECK(n >= 0, "set_num_threads: {} threads (expected > 0, or 0 to let tandem choose)", n);
  g_program_chose = n > 0;
  if (n > 0) omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

int threads_per_rank(int usable_cpus, int node_cpus, int local_ranks) {
  return std::max(1, std::min(usable_cpus, node_cpus / std::max(1, local_ranks)));
}

ThreadChoice share_node_cpus(int local_ranks) {
  ThreadChoice c;
  if (g_program_chose) {
    c.reason = "the program's choice (set_num_threads)";
  } else if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    c.reason = "OMP_NUM_THREADS";
  } else if (local_ranks > 1) {
    const int usable = omp_get_num_procs(), node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    const int share = threads_per_rank(usable, node, local_ranks);
    c.changed = share != omp_get_max_threads();
    omp_set_num_threads(share);
    c.reason = fmt::format("{} CPUs on the node shared by its {} ranks, {} usable by this one", node, local_ranks,
                           usable);
  } else {
    c.reason = "OpenMP's default: the CPUs this process may use";
  }
  c.count = omp_get_max_threads();
  return c;
}

}  // namespace tandem
