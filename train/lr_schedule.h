// The run's learning-rate schedule from its flags (--lr-schedule cosine|constant|step, --lr-step-size,
// --lr-gamma, --warmup-steps) or its --config block, built from the library's schedules, and the
// linear scaling rule (--lr-scale-with-world).
#pragma once
#include <cstdint>
#include <memory>

#include "train/train_config.h"
#include "nn/optim/lr_scheduler.h"

namespace tandem::train {

// The schedule per optimizer step over a run of `total_steps` steps, or nullptr for a constant lr:
//   cosine: CosineAnnealingLR down to 0 at the last step (over the steps after the warmup);
//   step: StepLR(step_size, gamma) in optimizer steps; constant: the base lr;
//   a --config schedule (cfg.lr_scheduler) replaces the type.
// warmup_steps N > 0 puts a LinearWarmup in front: lr = base * (s + 1) / (N + 1) at step s < N, so the
// first step already moves, and the wrapped schedule starts at step N from its own step 0.
std::unique_ptr<nn::LRScheduler> make_lr_schedule(const TrainConfig& cfg, nn::Optimizer& optimizer,
                                                  int64_t total_steps);

// --lr-scale-with-world: the linear scaling rule (Goyal et al. 2017): the peak lr grows with the
// global batch, i.e. times the world size. Returns the lr now in cfg.optimizer.
double scale_lr_with_world(TrainConfig& cfg, int world_size);

}  // namespace tandem::train
