// Adam / AdamW: per-parameter state (step, exp_avg, exp_avg_sq) and the update through
// kernels::optim_adam_step, or on a GPU kernels::multi_tensor_adam over all the parameters.
#include "nn/optim/adam.h"

#include <utility>
#include <vector>

#include "nn/optim/per_device.h"
#include "runtime/autograd.h"
#include "runtime/env_settings.h"
#include "runtime/backend/multi_tensor.h"
#include "runtime/backend/optim.h"

namespace tandem::nn {
namespace {

AdamHyper hyper(const ParamGroup& group, const AdamOptions& o, bool decoupled, int64_t step) {
  return adam_hyper(group.lr, o.beta1, o.beta2, o.eps, group.weight_decay, decoupled, step);
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled)
    : Optimizer(std::move(groups)), options_(options), decoupled_(decoupled) {
  TANDEM_CHECK(options.eps >= 0.0, "{}: invalid eps {}", type_name(), options.eps);
  TANDEM_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0, "{}: invalid beta1 {} (must be in [0, 1))",
               type_name(), options.beta1);
  TANDEM_CHECK(options.beta2 >= 0.0 && options.beta2 < 1.0, "{}: invalid beta2 {} (must be in [0, 1))",
               type_name(), options.beta2);
  state_.resize(num_params());
}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options) : Adam(std::move(groups), options, false) {}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options)
    : Adam(single_group(params, options.lr, options.weight_decay), options, false) {}

Adam::State& Adam::next_step(size_t index, const Tensor& param) {
  if (index >= state_.size()) state_.resize(num_params());
  State& s = state_[index];
  if (!s.exp_avg.defined()) {
    s.exp_avg = Tensor::zeros(param.shape(), param.dtype(), param.device());
    s.exp_avg_sq = Tensor::zeros(param.shape(), param.dtype(), param.device());
  }
  s.step += 1;
  return s;
}

void Adam::update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) {
  State& s = next_step(index, param);
  const AdamHyper h = hyper(group, options_, decoupled_, s.step);
  kernels::optim_adam_step(param.device())(param, grad, s.exp_avg, s.exp_avg_sq, h);
}

// A GPT-2 has 148 parameters, 98 of them vectors of 768 to 3,072 elements: one launch each left the
// GPU between kernels most of the time they took (1.46 ms of AdamW kernels on an H100; FusedAdamW's
// two launches made the step ~0.4 ms shorter in the same run). A gradient has its parameter's
// dtype, shape and device (set_grad's check); multi_tensor_adam checks the lists again.
// TANDEM_ADAM=per-tensor keeps one launch a parameter on a GPU too (A/B runs).
void Adam::step() {
  static const bool per_tensor = env::choice("TANDEM_ADAM") == 1;
  NoGradGuard no_grad;
  PerDevice<kernels::MultiTensorAdamArgs> lists;
  size_t index = 0;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      const Tensor grad = p.grad();
      if (grad.defined()) {
        if (p.device().is_cpu() || per_tensor) {
          update(g, index, p, grad);
        } else {
          kernels::MultiTensorAdamArgs& a = lists[p.device()];
          State& s = next_step(index, p);
          a.params.push_back(p);
          a.grads.push_back(grad);
          a.exp_avgs.push_back(s.exp_avg);
          a.exp_avg_sqs.push_back(s.exp_avg_sq);
          a.hypers.push_back(hyper(g, options_, decoupled_, s.step));
        }
      }
      ++index;
    }
  for (auto& [device, args] : lists) kernels::multi_tensor_adam(device)(args);
  ++step_count_;
}

NamedTensors Adam::param_state(size_t index) const {
  if (index >= state_.size() || !state_[index].exp_avg.defined()) return {};
  const State& s = state_[index];
  return {{"step", Tensor::scalar(static_cast<double>(s.step), DType::i64)},
          {"exp_avg", s.exp_avg},
          {"exp_avg_sq", s.exp_avg_sq}};
}

void Adam::reset_param_state(size_t index) {
  if (index >= state_.size()) state_.resize(num_params());
  state_[index] = State{};
}

void Adam::set_param_state(size_t index, const std::string& name, const Tensor& value) {
  State& s = state_[index];
  Device dev = param_at(index).device();
  if (name == "step") s.step = value.to_vector<int64_t>()[0];
  else if (name == "exp_avg") s.exp_avg = value.to(dev).clone();
  else if (name == "exp_avg_sq") s.exp_avg_sq = value.to(dev).clone();
  else TANDEM_FAIL(Value, "{}: no state named '{}'", type_name(), name);
}

void Adam::check_loaded_state(size_t index, const std::vector<std::string>& given) const {
  TANDEM_CHECK(given.empty() || given.size() == 3,
               "{}::load_state_tensors: parameter {} needs all of 'state.{}.step', 'state.{}.exp_avg' and "
               "'state.{}.exp_avg_sq', or none ({} given)", type_name(), index, index, index, index, given.size());
}

}  // namespace tandem::nn
