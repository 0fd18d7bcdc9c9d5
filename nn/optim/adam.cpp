// Adam / AdamW: per-parameter state (step, exp_avg, exp_avg_sq) and the update through
// kernels::optim_adam_step.
#include "nn/optim/adam.h"

#include "runtime/backend/optim.h"

namespace tandem::nn {

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

void Adam::update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) {
  if (index >= state_.size()) state_.resize(num_params());
  State& s = state_[index];
  if (!s.exp_avg.defined()) {
    s.exp_avg = Tensor::zeros(param.shape(), param.dtype(), param.device());
    s.exp_avg_sq = Tensor::zeros(param.shape(), param.dtype(), param.device());
  }
  s.step += 1;
  const AdamHyper h = adam_hyper(group.lr, options_.beta1, options_.beta2, options_.eps, group.weight_decay,
                                 decoupled_, s.step);
  kernels::optim_adam_step(param.device())(param, grad, s.exp_avg, s.exp_avg_sq, h);
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
