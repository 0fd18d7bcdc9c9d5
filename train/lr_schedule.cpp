// make_lr_schedule and the linear scaling rule.
#include "train/lr_schedule.h"

#include "nn/config/run_config.h"

namespace tandem::train {

std::unique_ptr<nn::LRScheduler> make_lr_schedule(const TrainConfig& cfg, nn::Optimizer& optimizer,
                                                  int64_t total_steps) {
  return nn::config::build_scheduler(cfg.lr_scheduler, optimizer, total_steps);
}

double scale_lr_with_world(TrainConfig& cfg, int world_size) {
  if (cfg.lr_scale_with_world) cfg.optimizer.learning_rate *= static_cast<double>(world_size);
  return cfg.optimizer.learning_rate;
}

}  // namespace tandem::train
