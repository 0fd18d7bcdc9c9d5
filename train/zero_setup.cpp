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
  if (use.grad_clip > 0)
    TANDEM_FAIL(NotSupported,
                "--zero {} with --grad-clip {} (training.grad_clip; gpt clips at 1.0 by default) is not supported "
                "yet: the norm would be of this rank's shard; give --grad-clip 0, or --zero 0",
                use.zero_stage, use.grad_clip);
  if (use.checkpoints)
    TANDEM_FAIL(NotSupported,
                "--zero {} with checkpoints (--save / --resume) is not supported yet: the optimizer state is "
                "sharded over the ranks and rank 0 writes the checkpoint alone; use --zero 0",
                use.zero_stage);
  return std::make_unique<nn::parallel::ZeroOptimizer>(*ddp, std::move(optimizer));
}

}  // namespace tandem::train
