// FusedAdam: per-parameter state and one kernels::multi_tensor_adam launch per device.
#include "nn/optim/fused_adam.h"

#include "runtime/backend/multi_tensor.h"

namespace tandem::nn {

FusedAdam::FusedAdam(std::vector<ParamGroup> groups, const AdamOptions& options, const FusedOptions& fused,
                     bool decoupled)
    : FusedOptimizer(std::move(groups), fused), options_(options), decoupled_(decoupled) {
  TANDEM_CHECK(options.eps >= 0.0, "{}: invalid eps {}", type_name(), options.eps);
  TANDEM_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0, "{}: invalid beta1 {} (must be in [0, 1))",
               type_name(), options.beta1);
  TANDEM_CHECK(options.beta2 >= 0.0 && options.beta2 < 1.0, "{}: invalid beta2 {} (must be in [0, 1))",
               type_name(), options.beta2);
  state_.resize(num_params());
}

FusedAdam::FusedAdam(const std::vector<Tensor>& params, const AdamOptions& options, const FusedOptions& fused)
    : FusedAdam(single_group(params, options.lr, options.weight_decay), options, fused, false) {}

void FusedAdam::launch(Device device, const std::vector<size_t>& indices, double grad_factor) {
  kernels::MultiTensorAdamArgs a;
  a.grad_factor = grad_factor;
  for (size_t i : indices) {
    const Tensor& p = opt_param(i);
    State& s = state_[i];
    if (!s.exp_avg.defined()) {
      s.exp_avg = Tensor::zeros(p.shape(), p.dtype(), p.device());
      s.exp_avg_sq = Tensor::zeros(p.shape(), p.dtype(), p.device());
    }
    s.step += 1;
    const ParamGroup& g = group_of(i);
    const AdamHyper h = adam_hyper(g.lr, options_.beta1, options_.beta2, options_.eps, g.weight_decay, decoupled_,
                                   s.step);
    a.params.push_back(p);
    a.grads.push_back(model_param(i).grad());
    a.exp_avgs.push_back(s.exp_avg);
    a.exp_avg_sqs.push_back(s.exp_avg_sq);
    if (has_master_weights()) a.model_params.push_back(model_param(i));
    a.hypers.push_back(h);
  }
  kernels::multi_tensor_adam(device)(a);
}

NamedTensors FusedAdam::param_state(size_t index) const {
  NamedTensors out;
  if (index < state_.size() && state_[index].exp_avg.defined()) {
    const State& s = state_[index];
    out = {{"step", Tensor::scalar(static_cast<double>(s.step), DType::i64)},
           {"exp_avg", s.exp_avg},
           {"exp_avg_sq", s.exp_avg_sq}};
  }
  for (auto& e : master_state(index)) out.push_back(e);
  return out;
}

void FusedAdam::reset_param_state(size_t index) {
  if (index >= state_.size()) state_.resize(num_params());
  state_[index] = State{};
}

void FusedAdam::set_param_state(size_t index, const std::string& name, const Tensor& value) {
  if (set_master_state(index, name, value)) return;
  State& s = state_[index];
  Device dev = opt_param(index).device();
  if (name == "step") s.step = value.to_vector<int64_t>()[0];
  else if (name == "exp_avg") s.exp_avg = value.to(dev).clone();
  else if (name == "exp_avg_sq") s.exp_avg_sq = value.to(dev).clone();
  else TANDEM_FAIL(Value, "{}: no state named '{}'", type_name(), name);
}

}  // namespace tandem::nn
