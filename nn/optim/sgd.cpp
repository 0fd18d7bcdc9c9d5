// SGD: validation, lazily made momentum buffers, the update through kernels::optim_sgd_step.
#include "nn/optim/sgd.h"

#include "runtime/backend/optim.h"

namespace tandem::nn {

namespace {
void check_options(const SGDOptions& o) {
  TANDEM_CHECK(o.momentum >= 0.0, "SGD: invalid momentum {} (must be >= 0)", o.momentum);
  TANDEM_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: nesterov momentum requires momentum > 0 and dampening = 0 (got momentum {}, dampening {})",
               o.momentum, o.dampening);
}
}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups)), options_(options) {
  check_options(options_);
  momentum_.resize(num_params());
}

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options)
    : SGD(single_group(params, options.lr, options.weight_decay), options) {}

void SGD::update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) {
  if (index >= momentum_.size()) momentum_.resize(num_params());
  SgdHyper h;
  h.lr = group.lr;
  h.momentum = options_.momentum;
  h.dampening = options_.dampening;
  h.weight_decay = group.weight_decay;
  h.nesterov = options_.nesterov;
  Tensor& buf = momentum_[index];
  if (options_.momentum != 0.0 && !buf.defined()) {
    buf = Tensor::empty(param.shape(), param.dtype(), param.device());
    h.first_step = true;
  }
  kernels::optim_sgd_step(param.device())(param, grad, buf, h);
}

NamedTensors SGD::param_state(size_t index) const {
  if (index < momentum_.size() && momentum_[index].defined()) return {{"momentum_buffer", momentum_[index]}};
  return {};
}

void SGD::reset_param_state(size_t index) {
  if (index >= momentum_.size()) momentum_.resize(num_params());
  momentum_[index] = Tensor();
}

void SGD::set_param_state(size_t index, const std::string& name, const Tensor& value) {
  TANDEM_CHECK(name == "momentum_buffer", "SGD: no state named '{}'", name);
  momentum_[index] = value.to(param_at(index).device()).clone();
}

}  // namespace tandem::nn
