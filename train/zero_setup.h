// ZeRO in the train loops (tandem-train's FullTrainer, the C API's Session): the run's optimizer
// wrapped for DDP's zero_stage (nn/parallel/zero_optimizer.h), and the settings refused with it.
#pragma once
#include <memory>

#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp.h"

namespace tandem::train {

struct ZeroUse {
  int zero_stage = 0;        // ddp.zero_stage (--zero)
  bool checkpoints = false;  // a save folder or a resume
};

// `optimizer` unchanged for zero_stage 0; otherwise a ZeroOptimizer over ddp's shard of it.
// NotSupportedError naming the combination where zero_stage > 0 meets what it does not do yet: no
// DDP (--mode single or dp), checkpoints (the optimizer state is sharded and rank 0 writes it
// alone). Clipping works through DDP's rank-ordered norm (nn/parallel/ranked_norm.h).
std::unique_ptr<nn::Optimizer> zero_optimizer(nn::parallel::DistributedDataParallel* ddp, const ZeroUse& use,
                                              std::unique_ptr<nn::Optimizer> optimizer);

}  // namespace tandem::train
