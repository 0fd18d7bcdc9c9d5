// The run's learning-rate schedule (cfg.lr_scheduler, which --lr-schedule, --lr-step-size, --lr-gamma,
// --warmup-steps and a --config file's lr_scheduler block set), and the linear scaling rule
// (--lr-scale-with-world).
#pragma once
#include <cstdint>
#include <memory>

#include "train/train_config.h"
#include "nn/optim/lr_scheduler.h"

namespace tandem::train {

// The schedule per optimizer step over a run of `total_steps` steps (nn::config::build_scheduler:
// cosine goes down to 0 at the last step, over the steps after the warmup), or nullptr for a
// constant lr.
std::unique_ptr<nn::LRScheduler> make_lr_schedule(const TrainConfig& cfg, nn::Optimizer& optimizer,
                                                  int64_t total_steps);

// --lr-scale-with-world: the linear scaling rule (Goyal et al. 2017): the peak lr grows with the
// global batch, i.e. times the world size. Returns the lr now in cfg.optimizer.
double scale_lr_with_world(TrainConfig& cfg, int world_size);

}  // namespace tandem::train
