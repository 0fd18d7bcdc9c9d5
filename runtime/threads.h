// How many threads the CPU kernels run (OpenMP). Ranks that share a node share its CPUs: left at
// OpenMP's default, each of N unbound ranks runs a thread per CPU of the node and the spinning
// threads take turns (two ranks on two cores ran a GPT ~9x slower, a 2-rank DDP example 18x). So
// when a communicator is made for ranks that share a node, tandem gives each its share, unless the
// program chose (set_num_threads) or OMP_NUM_THREADS is set, and says so once.
#pragma once
#include <string>

namespace tandem {

// The count for the calling thread (and those tandem starts for its work, e.g. DataParallel's device
// threads). n > 0: the program's choice, which tandem never changes afterwards; 0: tandem chooses
// again (the next communicator shares the node), the count staying as it is until then.
void set_num_threads(int n);
int num_threads();  // omp_get_max_threads()

// max(1, min(usable_cpus, node_cpus / local_ranks)): a rank bound to one core keeps one thread,
// ranks bound to a socket split it, unbound ranks split the node; local_ranks <= 0 counts as 1.
int threads_per_rank(int usable_cpus, int node_cpus, int local_ranks);

struct ThreadChoice {
  int count = 1;
  std::string reason;    // for a log line: where the count came from
  bool changed = false;  // this call set it
};

// The rule above for a process with local_ranks ranks on its node: the program's choice
// (set_num_threads), else OMP_NUM_THREADS, else its share of the node when local_ranks > 1, else
// OpenMP's default. Sets the count where the rule says so; returns it and why.
ThreadChoice share_node_cpus(int local_ranks);

}  // namespace tandem
