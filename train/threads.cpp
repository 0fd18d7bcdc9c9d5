// tandem-train's thread count (train/threads.h).
#include "train/threads.h"

#include "comm/communicator.h"

namespace tandem::train {

ThreadChoice apply_threads(int threads) {
  if (threads > 0) {
    set_num_threads(threads);
    return ThreadChoice{num_threads(), "--threads", true};
  }
  set_num_threads(0);  // no flag: the library's rule, whatever an earlier call chose
  return share_node_cpus(comm::launcher_local_size());
}

}  // namespace tandem::train
