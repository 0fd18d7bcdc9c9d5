// tandem-train's --trace FILE: every rank records (runtime/trace.h) from a common origin taken right
// after a barrier; at the end each rank writes its part, and rank 0 merges them into one Chrome trace
// JSON with one pid per rank (Perfetto, chrome://tracing).
#pragma once
#include <string>

#include "train/logging.h"
#include "train/parallel_setup.h"

namespace tandem::train {

// Collective in ddp mode (a barrier); nothing when path is empty.
void start_trace(const std::string& path, const ParallelSetup& ps);
// Collective in ddp mode: parts FILE.rank<R>, then rank 0 writes FILE and removes the parts.
void finish_trace(const std::string& path, const ParallelSetup& ps, const Logger& log);

}  // namespace tandem::train
