// FusedSGD: lazily made momentum buffers and one kernels::multi_tensor_sgd launch per device.
#include "nn/optim/fused_sgd.h"

#include "runtime/backend/multi_tensor.h"

namespace tandem::nn {

FusedSGD::FusedSGD(std::vector<ParamGroup> groups, const SGDOptions& options, const FusedOptions& fused)
    : FusedOptimizer(std::move(groups), fused), options_(options) {
  TANDEM_CHECK(options.momentum >= 0.0, "FusedSGD: invalid momentum {} (must be >= 0)", options.momentum);
  TANDEM_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
               "FusedSGD: nesterov momentum requires momentum > 0 and dampening = 0 (got momentum {}, dampening {})",
               options.momentum, options.dampening);
  momentum_.resize(num_params());
}

FusedSGD::FusedSGD(const std::vector<Tensor>& params, const SGDOptions& options, const FusedOptions& fused)
    : FusedSGD(single_group(params, options.lr, options.weight_decay), options, fused) {}

void FusedSGD::launch(Device device, const std::vector<size_t>& indices, double grad_factor) {
  kernels::MultiTensorSgdArgs a;
  a.grad_factor = grad_factor;
  for (size_t i : indices) {
    const Tensor& p = opt_param(i);
    const ParamGroup& g = group_of(i);
    SgdHyper h;
    h.lr = g.lr;
    h.momentum = options_.momentum;
    h.dampening = options_.dampening;
    h.weight_decay = g.weight_decay;
    h.nesterov = options_.nesterov;
    if (options_.momentum != 0.0) {
      if (!momentum_[i].defined()) {
        momentum_[i] = Tensor::empty(p.shape(), p.dtype(), p.device());
        h.first_step = true;
      }
      a.momentum_bufs.push_back(momentum_[i]);
    }
    a.params.push_back(p);
    a.grads.push_back(model_param(i).grad());
    if (has_master_weights()) a.model_params.push_back(model_param(i));
    a.hypers.push_back(h);
  }
  kernels::multi_tensor_sgd(device)(a);
}

NamedTensors FusedSGD::param_state(size_t index) const {
  NamedTensors out;
  if (index < momentum_.size() && momentum_[index].defined()) out.emplace_back("momentum_buffer", momentum_[index]);
  for (auto& e : master_state(index)) out.push_back(e);
  return out;
}

void FusedSGD::reset_param_state(size_t index) {
  if (index >= momentum_.size()) momentum_.resize(num_params());
  momentum_[index] = Tensor();
}

void FusedSGD::set_param_state(size_t index, const std::string& name, const Tensor& value) {
  if (set_master_state(index, name, value)) return;
  TANDEM_CHECK(name == "momentum_buffer", "FusedSGD: no state named '{}'", name);
  momentum_[index] = value.to(opt_param(index).device()).clone();
}

}  // namespace tandem::nn
