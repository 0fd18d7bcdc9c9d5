// Learning-rate schedules as PyTorch's (closed forms): StepLR, CosineAnnealingLR, and LinearWarmup
// (torch's LinearLR from start_factor to 1; wrapping another schedule it is SequentialLR([LinearLR,
// inner], milestones=[warmup_steps])). Construction sets the lr for epoch 0, as PyTorch; step()
// advances one epoch (or one iteration: the unit is the caller's).
#pragma once
#include <memory>
#include <vector>

#include "nn/optim/optimizer.h"

namespace tandem::nn {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  // The schedule's lr for `epoch` in group `group` (pure: no state change).
  virtual double lr_at(int64_t epoch, size_t group) const = 0;
  std::vector<double> get_last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // {"last_epoch": i64 scalar}; loading sets the optimizer's lrs for that epoch.
  NamedTensors state_tensors() const;
  void load_state_tensors(const NamedTensors& state);
  void set_last_epoch(int64_t epoch);

 protected:
  // Records the groups' initial_lr (first scheduler on an optimizer) as base lrs. Derived
  // constructors call start() once they are fully built.
  explicit LRScheduler(Optimizer& optimizer);
  void start() { set_last_epoch(0); }

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
};

// lr = base * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, size_t group) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / t_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, size_t group) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// epoch < warmup: lr = base * (start_factor + (1 - start_factor) * epoch / warmup);
// afterwards: base, or inner->lr_at(epoch - warmup) when an inner schedule is given.
class LinearWarmup : public LRScheduler {
 public:
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = 1.0 / 3.0,
               std::shared_ptr<LRScheduler> inner = nullptr);
  double lr_at(int64_t epoch, size_t group) const override;

 private:
  int64_t warmup_;
  double start_factor_;
  std::shared_ptr<LRScheduler> inner_;
};

}  // namespace tandem::nn
