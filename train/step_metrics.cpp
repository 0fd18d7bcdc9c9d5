// Per-step metrics records.
#include "train/step_metrics.h"

#include <algorithm>
#include <chrono>

namespace tandem::train {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void StepMetrics::on_train_begin(Trainer& t) {
  last_step_ = t.state().step;
  last_time_ = now_s();
}

void StepMetrics::after_step(Trainer& t) {
  const int64_t step = t.state().step;
  if (every_ <= 0 || step % every_ != 0 || !t.metrics().enabled()) return;
  const TrainConfig& cfg = t.config();
  int64_t total = cfg.epochs * t.steps_per_epoch();
  if (cfg.max_steps > 0) total = std::min(total, cfg.max_steps);
  const double now = now_s();
  const double samples = static_cast<double>((step - last_step_) * cfg.batch_size *
                                             std::max<int64_t>(cfg.accumulation_steps, 1) * t.world().size());
  const double rate = now > last_time_ ? samples / (now - last_time_) : 0.0;
  t.metrics().write({{"event", "step"},
                     {"step", step},
                     {"total_steps", total},
                     {"epoch", t.state().epoch + 1},
                     {"loss", t.last_loss()},
                     {"lr", t.optimizer().get_lr()},
                     {"samples_per_s", rate},
                     {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()}});
  last_step_ = step;
  last_time_ = now;
}

}  // namespace tandem::train
