// LR schedules: closed forms of PyTorch's StepLR, CosineAnnealingLR, LinearLR/SequentialLR.
#include "nn/optim/lr_scheduler.h"

#include <cmath>

namespace tandem::nn {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& g : optimizer_.param_groups()) {
    if (g.initial_lr < 0.0) g.initial_lr = g.lr;
    base_lrs_.push_back(g.initial_lr);
  }
}

void LRScheduler::set_last_epoch(int64_t epoch) {
  TANDEM_CHECK(epoch >= 0, "LR scheduler: epoch {} must be >= 0", epoch);
  last_epoch_ = epoch;
  for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, lr_at(epoch, g));
}

void LRScheduler::step() { set_last_epoch(last_epoch_ + 1); }

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs_.size(); ++g) out.push_back(optimizer_.get_lr(g));
  return out;
}

NamedTensors LRScheduler::state_tensors() const {
  return {{"last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), DType::i64)}};
}

void LRScheduler::load_state_tensors(const NamedTensors& state) {
  const Tensor* epoch = nullptr;
  for (const auto& [n, t] : state) {
    TANDEM_CHECK(n == "last_epoch", "LR scheduler: unexpected state entry '{}' (expected 'last_epoch')", n);
    epoch = &t;
  }
  TANDEM_CHECK(epoch, "LR scheduler: state has no 'last_epoch' entry");
  TANDEM_CHECK(epoch->numel() == 1, "LR scheduler: 'last_epoch' has shape {}, expected a scalar",
               shape_str(epoch->shape()));
  set_last_epoch(epoch->to_vector<int64_t>()[0]);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TANDEM_CHECK(step_size > 0, "StepLR: step_size {} must be > 0", step_size);
  start();
}

double StepLR::lr_at(int64_t epoch, size_t group) const {
  return base_lrs_[group] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  TANDEM_CHECK(t_max > 0, "CosineAnnealingLR: t_max {} must be > 0", t_max);
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch, size_t group) const {
  const double pi = std::acos(-1.0);
  return eta_min_ + (base_lrs_[group] - eta_min_) *
                        (1.0 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2.0;
}

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           std::shared_ptr<LRScheduler> inner)
    : LRScheduler(optimizer), warmup_(warmup_steps), start_factor_(start_factor), inner_(std::move(inner)) {
  TANDEM_CHECK(warmup_steps >= 0, "LinearWarmup: warmup_steps {} must be >= 0", warmup_steps);
  TANDEM_CHECK(start_factor > 0.0 && start_factor <= 1.0, "LinearWarmup: start_factor {} must be in (0, 1]",
               start_factor);
  start();
}

double LinearWarmup::lr_at(int64_t epoch, size_t group) const {
  if (epoch < warmup_)
    return base_lrs_[group] *
           (start_factor_ + (1.0 - start_factor_) * static_cast<double>(epoch) / static_cast<double>(warmup_));
  if (inner_) return inner_->lr_at(epoch - warmup_, group);
  return base_lrs_[group];
}

}  // namespace tandem::nn
