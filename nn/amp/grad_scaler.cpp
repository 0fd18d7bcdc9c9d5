// GradScaler: scale, fused unscale + inf/nan check, skip-or-step, and the scale update rule of
// torch's _amp_update_scale_ (state kept in f32 like PyTorch's scale tensor).
#include "nn/amp/grad_scaler.h"

#include <cmath>

#include "comm/communicator.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/fused_optimizer.h"
#include "runtime/autograd.h"
#include "runtime/backend/multi_tensor.h"
#include "runtime/ops/elementwise.h"

namespace tandem::nn {

namespace {
// The gradients an optimizer will read: the model's parameters' (fused master-weights mode keeps
// f32 copies without gradients in its groups).
std::vector<Tensor> optimizer_grads(Optimizer& opt) {
  std::vector<Tensor> grads;
  if (auto* fused = dynamic_cast<FusedOptimizer*>(&opt)) {
    for (const Tensor& p : fused->model_params())
      if (p.grad().defined()) grads.push_back(p.grad());
    return grads;
  }
  for (const auto& g : opt.param_groups())
    for (const Tensor& p : g.params)
      if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}
}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options, comm::Communicator* comm)
    : options_(options), comm_(comm), enabled_(options.enabled), scale_(static_cast<float>(options.init_scale)) {
  TANDEM_CHECK(options.init_scale > 0.0 && std::isfinite(options.init_scale), "GradScaler: init_scale {} must be a "
               "positive finite number", options.init_scale);
  TANDEM_CHECK(options.growth_factor > 1.0, "GradScaler: growth_factor {} must be > 1", options.growth_factor);
  TANDEM_CHECK(options.backoff_factor > 0.0 && options.backoff_factor < 1.0,
               "GradScaler: backoff_factor {} must be in (0, 1)", options.backoff_factor);
  TANDEM_CHECK(options.growth_interval > 0, "GradScaler: growth_interval {} must be > 0", options.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  return ops::mul(loss, static_cast<double>(scale_));
}

bool GradScaler::reduce_found_inf(bool local) const {
  if (!comm_ || comm_->size() == 1) return local;
  Tensor flag = Tensor::full({1}, local ? 1.0 : 0.0, DType::f32, comm_->device());
  comm_->allreduce(flag, comm::ReduceOp::Max)->wait();
  return flag.item() != 0.0;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  TANDEM_CHECK(stage_ != StepStage::Unscaled, "GradScaler::unscale_() has already been called on this optimizer "
               "since the last update()");
  TANDEM_CHECK(stage_ != StepStage::Stepped, "GradScaler::unscale_() is being called after step(); call update() "
               "first");
  NoGradGuard no_grad;
  const double inv_scale = static_cast<double>(static_cast<float>(1.0 / static_cast<double>(scale_)));
  std::vector<Tensor> grads = optimizer_grads(optimizer);
  std::vector<std::pair<Device, std::vector<Tensor>>> lists;
  for (const Tensor& g : grads) {
    auto it = std::find_if(lists.begin(), lists.end(), [&](const auto& l) { return l.first == g.device(); });
    if (it == lists.end()) it = lists.insert(lists.end(), {g.device(), {}});
    it->second.push_back(g);
  }
  bool local = false;
  for (auto& [device, list] : lists) {
    Tensor found = Tensor::zeros({1}, DType::f32, device);
    kernels::multi_tensor_unscale(device)(list, inv_scale, found);
    local = local || found.item() != 0.0;
  }
  found_inf_ = reduce_found_inf(local);
  stage_ = StepStage::Unscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer_step(optimizer);
    return true;
  }
  TANDEM_CHECK(stage_ != StepStage::Stepped, "GradScaler::step() has already been called since the last update()");
  auto* fused = dynamic_cast<FusedOptimizer*>(&optimizer);
  if (stage_ == StepStage::Ready && fused) {
    // One read pass gives the inf/nan flag and the norm; the unscale and clip ride on the update.
    GradCheck check = fused->check_grads();
    found_inf_ = reduce_found_inf(check.found_inf);
    stage_ = StepStage::Stepped;
    if (found_inf_) return false;
    const double inv_scale = static_cast<double>(static_cast<float>(1.0 / static_cast<double>(scale_)));
    fused->fused_step(inv_scale, check.sum_squares);
    return true;
  }
  if (stage_ == StepStage::Ready) unscale_(optimizer);
  stage_ = StepStage::Stepped;
  if (found_inf_) return false;
  optimizer_step(optimizer);
  return true;
}

void GradScaler::update() {
  if (!enabled_) return;
  TANDEM_CHECK(stage_ == StepStage::Stepped, "GradScaler::update(): no inf checks were recorded prior to update "
               "(call step(optimizer) first)");
  if (found_inf_) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * options_.backoff_factor);
    growth_tracker_ = 0;
  } else {
    int64_t successful = growth_tracker_ + 1;
    if (successful == options_.growth_interval) {
      float grown = static_cast<float>(static_cast<double>(scale_) * options_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  stage_ = StepStage::Ready;
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  TANDEM_CHECK(new_scale > 0.0 && std::isfinite(new_scale), "GradScaler::update: new scale {} must be positive "
               "and finite", new_scale);
  scale_ = static_cast<float>(new_scale);
  stage_ = StepStage::Ready;
}

NamedTensors GradScaler::state_dict() const {
  return {{"scale", Tensor::scalar(static_cast<double>(scale_), DType::f32)},
          {"growth_tracker", Tensor::scalar(static_cast<double>(growth_tracker_), DType::i64)},
          {"growth_factor", Tensor::scalar(options_.growth_factor, DType::f64)},
          {"backoff_factor", Tensor::scalar(options_.backoff_factor, DType::f64)},
          {"growth_interval", Tensor::scalar(static_cast<double>(options_.growth_interval), DType::i64)}};
}

void GradScaler::load_state_dict(const NamedTensors& state) {
  auto get = [&](const char* name) -> Tensor {
    for (const auto& [n, t] : state)
      if (n == name) {
        TANDEM_CHECK(t.numel() == 1, "GradScaler::load_state_dict: '{}' has shape {}, expected a scalar", name,
                     shape_str(t.shape()));
        return t;
      }
    TANDEM_FAIL(Value, "GradScaler::load_state_dict: missing entry '{}'", name);
  };
  for (const auto& [n, t] : state)
    TANDEM_CHECK(n == "scale" || n == "growth_tracker" || n == "growth_factor" || n == "backoff_factor" ||
                     n == "growth_interval",
                 "GradScaler::load_state_dict: unexpected entry '{}'", n);
  Tensor scale = get("scale");
  TANDEM_CHECK(scale.dtype() == DType::f32, "GradScaler::load_state_dict: 'scale' has dtype {}, expected f32",
               dtype_name(scale.dtype()));
  scale_ = scale.to_vector<float>()[0];
  growth_tracker_ = get("growth_tracker").to_vector<int64_t>()[0];
  options_.growth_factor = get("growth_factor").item();
  options_.backoff_factor = get("backoff_factor").item();
  options_.growth_interval = get("growth_interval").to_vector<int64_t>()[0];
  stage_ = StepStage::Ready;
}

void clipped_scaler_step(GradScaler& scaler, Optimizer& optimizer, const std::vector<Tensor>& params,
                         double max_norm) {
  clipped_scaler_step(scaler, optimizer, [&](double m) { clip_grad_norm(params, m); }, max_norm);
}

void clipped_scaler_step(GradScaler& scaler, Optimizer& optimizer, const std::function<void(double)>& clip,
                         double max_norm) {
  if (max_norm > 0) {
    scaler.unscale_(optimizer);  // clip the true gradients (a no-op when the scaler is disabled)
    if (!scaler.found_inf()) clip(max_norm);
  }
  scaler.step(optimizer);
  scaler.update();
}

}  // namespace tandem::nn
