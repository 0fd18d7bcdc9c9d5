// How many threads a tandem-train process runs: --threads, else the library's rule for ranks that
// share a node (runtime/threads.h).
#pragma once
#include "runtime/threads.h"

namespace tandem::train {

using tandem::ThreadChoice;
using tandem::threads_per_rank;

// Sets the thread count: `threads` when > 0 (--threads, the program's choice); else the library's
// rule with the launcher's count of ranks on this node (OMP_NUM_THREADS, else the node's share when
// the launcher put several ranks here, else OpenMP's default). Returns the count and where it came from.
ThreadChoice apply_threads(int threads);

}  // namespace tandem::train
