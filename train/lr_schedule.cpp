// make_lr_schedule and the linear scaling rule: the app's flags bound to the library's schedules.
#include "train/lr_schedule.h"

#include <algorithm>

#include "nn/config/run_config.h"

namespace tandem::train {

std::unique_ptr<nn::LRScheduler> make_lr_schedule(const TrainConfig& cfg, nn::Optimizer& optimizer,
                                                  int64_t total_steps) {
  const int64_t warmup = cfg.schedule.warmup_steps;
  TANDEM_CHECK(warmup >= 0, "--warmup-steps must be >= 0, got {}", warmup);
  // The inner schedule is built first: it and the warmup then share the groups' initial lr as base.
  std::unique_ptr<nn::LRScheduler> inner;
  if (cfg.lr_scheduler) {
    inner = nn::config::build_scheduler(*cfg.lr_scheduler, optimizer);
  } else if (cfg.lr_schedule == "cosine") {
    inner = std::make_unique<nn::CosineAnnealingLR>(optimizer, std::max<int64_t>(total_steps - warmup, 1));
  } else if (cfg.lr_schedule == "step") {
    TANDEM_CHECK(cfg.schedule.step_size > 0, "--lr-schedule step needs --lr-step-size N (optimizer steps), N > 0");
    inner = std::make_unique<nn::StepLR>(optimizer, cfg.schedule.step_size, cfg.schedule.gamma);
  } else {
    TANDEM_CHECK(cfg.lr_schedule == "constant", "--lr-schedule must be cosine, step or constant, got '{}'",
                 cfg.lr_schedule);
  }
  if (warmup == 0) return inner;
  return std::make_unique<nn::LinearWarmup>(optimizer, warmup, 1.0 / static_cast<double>(warmup + 1),
                                            std::shared_ptr<nn::LRScheduler>(std::move(inner)));
}

double scale_lr_with_world(TrainConfig& cfg, int world_size) {
  if (cfg.lr_scale_with_world) cfg.optimizer.learning_rate *= static_cast<double>(world_size);
  return cfg.optimizer.learning_rate;
}

}  // namespace tandem::train
