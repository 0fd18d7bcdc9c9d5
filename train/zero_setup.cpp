// The ZeRO switch of the train loops and its refusals.
#include "train/zero_setup.h"

#include "nn/parallel/zero_optimizer.h"

namespace tandem::train {

std::unique_ptr<nn::Optimizer> zero_optimizer(nn::parallel::DistributedDataParallel* ddp, const ZeroUse& use,
                                              std::unique_ptr<nn::Optimizer> optimizer) {
  if (use.zero_stage == 0) return optimizer;
  if (!ddp)
    TANDEM_FAIL(NotSupported,
                "--zero {} (ddp.zero_stage) shards over the ranks of ddp: use --mode ddp (one rank works too)",
                use.zero_stage);
  return std::make_unique<nn::parallel::ZeroOptimizer>(*ddp, std::move(optimizer));
}

}  // namespace tandem::train
