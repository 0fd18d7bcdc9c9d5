// FullTrainer's part of the out-of-memory recovery (trainer_step.cpp): keeping DDP's collectives in
// step after this rank's step failed.
#include "train/train_features.h"
#include "runtime/memory_budget.h"

namespace tandem::train {

void FullTrainer::complete_failed_step() {
  if (!ps_.ddp) return;
  // SyncBatchNorm communicates inside forward, micro-batch by micro-batch: a rank that failed there
  // has left its peers inside a collective that nothing can complete. End the run clearly instead.
  if (config().sync_bn)
    throw_out_of_memory(__FILE__, __LINE__,
                        "out of memory with --sync-bn: SyncBatchNorm's collectives inside forward cannot be "
                        "completed for a failed step, so the micro-batch cannot be halved; start with a smaller "
                        "--batch-size and more --accumulation-steps");
  ps_.ddp->complete_failed_step();
}

}  // namespace tandem::train
