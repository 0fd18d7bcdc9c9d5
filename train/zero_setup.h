// ZeRO in the train loops (tandem-train's FullTrainer, the C API's Session): the run's optimizer
// wrapped for DDP's zero_stage (nn/parallel/zero_optimizer.h), and the settings refused with it.
#pragma once
#include <memory>

#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp.h"

namespace tandem::train {

struct ZeroUse {
  int zero_stage = 0;        // ddp.zero_stage (--zero)
};

// `optimizer` unchanged for zero_stage 0; otherwise a ZeroOptimizer over ddp's shard of it.
// NotSupportedError without DDP (--mode single or dp). Clipping works through DDP's rank-ordered
// norm (nn/parallel/ranked_norm.h); a checkpoint's optimizer state is consolidated on rank 0 in
// stage 0's layout (ZeroOptimizer::consolidate_state) and loads at any world size and stage.
std::unique_ptr<nn::Optimizer> zero_optimizer(nn::parallel::DistributedDataParallel* ddp, const ZeroUse& use,
                                              std::unique_ptr<nn::Optimizer> optimizer);

}  // namespace tandem::train
