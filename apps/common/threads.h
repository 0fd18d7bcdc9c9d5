// How many Eigen/OpenMP threads a tandem-train process runs. Under mpirun, OpenMP's default (every
// CPU the process may use) puts each rank's threads on all of the node's cores: two ranks on two
// cores ran the default GPT ~9x slower than with one thread each (spinning threads taking turns).
#pragma once
#include <string>

namespace tandem::app {

struct ThreadChoice {
  int count = 1;
  std::string reason;  // for the run's log line
};

// The node's CPUs shared among its ranks, within what this process may use: max(1, min(usable_cpus,
// node_cpus / local_ranks)). A rank bound to one core keeps one thread; ranks bound to a socket
// split it; unbound ranks split the node.
int threads_per_rank(int usable_cpus, int node_cpus, int local_ranks);

// Sets the thread count: `threads` when > 0 (--threads); else OMP_NUM_THREADS when set (OpenMP's
// own); else threads_per_rank when the launcher put several ranks on this node; else OpenMP's
// default. Returns the count in effect and where it came from.
ThreadChoice apply_threads(int threads);

}  // namespace tandem::app
