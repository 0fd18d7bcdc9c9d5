// FusedOptimizer: master weights, per-device tensor lists, the gradient check pass and the folded
// unscale/clip factor. The update kernels are kernels/multi_tensor.h.
#include "nn/optim/fused_optimizer.h"

#include <cmath>

#include "nn/optim/per_device.h"
#include "runtime/autograd.h"
#include "runtime/backend/multi_tensor.h"

namespace tandem::nn {

FusedOptimizer::FusedOptimizer(std::vector<ParamGroup> groups, const FusedOptions& options)
    : Optimizer(std::move(groups)), fused_(options) {
  TANDEM_CHECK(options.max_grad_norm >= 0.0, "fused optimizer: max_grad_norm {} must be >= 0 (0: no clipping)",
               options.max_grad_norm);
  NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      model_params_.push_back(p);
      if (options.master_weights && is_low_precision(p.dtype())) {
        Tensor master = Tensor::empty(p.shape(), DType::f32, p.device());
        master.copy_(p);
        master.set_name(p.name().empty() ? std::string("master") : p.name() + ".master");
        p = master;  // the optimizer updates the f32 copy
        has_master_ = true;
      }
      opt_params_.push_back(p);
    }
}

const ParamGroup& FusedOptimizer::group_of(size_t index) const {
  for (const auto& g : groups_) {
    if (index < g.params.size()) return g;
    index -= g.params.size();
  }
  TANDEM_FAIL(Value, "fused optimizer: parameter index out of range");
}

GradCheck FusedOptimizer::check_grads() const {
  // One list per device, in parameter order.
  PerDevice<std::vector<Tensor>> lists;
  for (const Tensor& p : model_params_) {
    Tensor g = p.grad();
    if (g.defined()) lists[g.device()].push_back(g);
  }
  GradCheck out;
  for (auto& [device, grads] : lists) {
    Tensor found = Tensor::zeros({1}, DType::f32, device);
    out.sum_squares += kernels::multi_tensor_sum_squares_check(device)(grads, found);
    out.found_inf = out.found_inf || found.item() != 0.0;
  }
  return out;
}

void FusedOptimizer::fused_step(double inv_scale, double scaled_sum_squares) {
  NoGradGuard no_grad;
  double factor = inv_scale;
  if (fused_.max_grad_norm > 0.0) {
    if (scaled_sum_squares < 0.0) scaled_sum_squares = check_grads().sum_squares;
    // sqrt(s) * inv_scale: exact for the power-of-two scales GradScaler uses, so the norm equals
    // that of the unscaled gradients (as clip_grad_norm after unscale_ computes it).
    const double total = std::sqrt(scaled_sum_squares) * inv_scale;
    TANDEM_CHECK(std::isfinite(total), "{}: the total gradient norm is {}; a gradient holds inf or nan (use a "
                 "GradScaler to skip such steps)", type_name(), total);
    last_grad_norm_ = total;
    const double coef = fused_.max_grad_norm / (total + 1e-6);
    if (coef < 1.0) factor *= coef;
  }
  PerDevice<std::vector<size_t>> lists;
  for (size_t i = 0; i < model_params_.size(); ++i) {
    Tensor g = model_params_[i].grad();
    if (g.defined()) lists[g.device()].push_back(i);
  }
  for (auto& [device, indices] : lists) launch(device, indices, factor);
  ++step_count_;
}

void FusedOptimizer::step() { fused_step(1.0); }

void FusedOptimizer::update(const ParamGroup&, size_t index, Tensor& param, const Tensor&) {
  launch(param.device(), {index}, 1.0);
}

void FusedOptimizer::zero_grad() { zero_grads(model_params_); }

NamedTensors FusedOptimizer::master_state(size_t index) const {
  if (!opt_params_[index].is_same(model_params_[index])) return {{"master", opt_params_[index]}};
  return {};
}

bool FusedOptimizer::set_master_state(size_t index, const std::string& name, const Tensor& value) {
  if (name != "master") return false;
  TANDEM_CHECK(!opt_params_[index].is_same(model_params_[index]),
               "{}: state 'master' given for parameter {}, which has no master copy", type_name(), index);
  Tensor master = opt_params_[index], model = model_params_[index];
  master.copy_(value);
  model.copy_(master);  // the model holds the rounded master, as after a step
  return true;
}

void optimizer_step(Optimizer& opt) {
  if (auto* fused = dynamic_cast<FusedOptimizer*>(&opt)) fused->step();
  else opt.step();
}

}  // namespace tandem::nn
