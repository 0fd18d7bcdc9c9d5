// Optimizer base: groups, step loop, state as named tensors.
#include "nn/optim/optimizer.h"

#include <unordered_map>
#include <utility>

#include "nn/optim/per_device.h"
#include "runtime/autograd.h"
#include "runtime/backend/multi_tensor.h"

namespace tandem::nn {

std::vector<ParamGroup> single_group(const std::vector<Tensor>& params, double lr, double weight_decay) {
  ParamGroup g;
  g.params = params;
  g.lr = lr;
  g.weight_decay = weight_decay;
  return {g};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  TANDEM_CHECK(group.lr >= 0.0, "optimizer: invalid learning rate {} (must be >= 0)", group.lr);
  TANDEM_CHECK(group.weight_decay >= 0.0, "optimizer: invalid weight_decay {} (must be >= 0)", group.weight_decay);
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    TANDEM_CHECK(p.defined(), "optimizer: parameter {} of group {} is undefined", i, groups_.size());
    TANDEM_CHECK(is_floating(p.dtype()), "optimizer: parameter {} ('{}') has dtype {}; only floating tensors "
                 "can be optimized", i, p.name(), dtype_name(p.dtype()));
    for (size_t j = 0; j < i; ++j)
      TANDEM_CHECK(!group.params[j].is_same(p), "optimizer: parameter {} ('{}') is listed twice in group {}", i,
                   p.name(), groups_.size());
    for (const auto& g : groups_)
      for (const auto& q : g.params)
        TANDEM_CHECK(!q.is_same(p), "optimizer: parameter '{}' appears in more than one group", p.name());
  }
  groups_.push_back(std::move(group));
}

size_t Optimizer::num_params() const {
  size_t n = 0;
  for (const auto& g : groups_) n += g.params.size();
  return n;
}

const Tensor& Optimizer::param_at(size_t index) const {
  for (const auto& g : groups_) {
    if (index < g.params.size()) return g.params[index];
    index -= g.params.size();
  }
  TANDEM_FAIL(Value, "optimizer: parameter index out of range");
}

std::unique_ptr<Optimizer> Optimizer::with_groups(std::vector<ParamGroup>) const {
  TANDEM_FAIL(NotSupported, "optimizer {} cannot be rebuilt over other parameters (with_groups), which ZeRO needs",
              type_name());
}

void Optimizer::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (grad.defined()) update(g, index, p, grad);
      ++index;
    }
  ++step_count_;
}

void zero_grads(const std::vector<Tensor>& params) {
  PerDevice<std::vector<Tensor>> by_device;
  for (const Tensor& p : params) {
    const Tensor& g = p.grad();
    if (g.defined()) by_device[g.device()].push_back(g);
  }
  for (const auto& [device, grads] : by_device) kernels::multi_tensor_zero(device)(grads);
}

void Optimizer::zero_grad() {
  std::vector<Tensor> params;
  for (auto& g : groups_) params.insert(params.end(), g.params.begin(), g.params.end());
  zero_grads(params);
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

void Optimizer::set_lr(size_t group, double lr) {
  TANDEM_CHECK(group < groups_.size(), "set_lr: group {} out of range ({} groups)", group, groups_.size());
  TANDEM_CHECK(lr >= 0.0, "set_lr: invalid learning rate {}", lr);
  groups_[group].lr = lr;
}

double Optimizer::get_lr(size_t group) const {
  TANDEM_CHECK(group < groups_.size(), "get_lr: group {} out of range ({} groups)", group, groups_.size());
  return groups_[group].lr;
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  out.emplace_back("step", Tensor::scalar(static_cast<double>(step_count_), DType::i64));
  for (size_t g = 0; g < groups_.size(); ++g)
    out.emplace_back("param_groups." + std::to_string(g) + ".lr", Tensor::scalar(groups_[g].lr, DType::f64));
  for (size_t i = 0; i < num_params(); ++i)
    for (auto& [name, t] : param_state(i)) out.emplace_back("state." + std::to_string(i) + "." + name, t.clone());
  return out;
}

void Optimizer::load_state_tensors(const NamedTensors& state) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) {
    TANDEM_CHECK(given.emplace(n, &t).second, "{}::load_state_tensors: entry '{}' given twice", type_name(), n);
  }
  auto take = [&](const std::string& name) -> const Tensor* {
    auto it = given.find(name);
    if (it == given.end()) return nullptr;
    const Tensor* t = it->second;
    given.erase(it);
    return t;
  };
  const Tensor* step = take("step");
  TANDEM_CHECK(step, "{}::load_state_tensors: missing entry 'step'", type_name());
  TANDEM_CHECK(step->numel() == 1, "{}::load_state_tensors: 'step' has shape {}, expected a scalar", type_name(),
               shape_str(step->shape()));
  std::vector<const Tensor*> lrs;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::string name = "param_groups." + std::to_string(g) + ".lr";
    const Tensor* lr = take(name);
    lrs.push_back(lr);
    TANDEM_CHECK(lr, "{}::load_state_tensors: missing entry '{}' (the optimizer has {} groups)", type_name(), name,
                 groups_.size());
    TANDEM_CHECK(lr->numel() == 1, "{}::load_state_tensors: '{}' is not a scalar", type_name(), name);
  }
  // Validate every per-parameter entry before changing anything.
  std::vector<std::pair<size_t, std::pair<std::string, const Tensor*>>> entries;
  const std::vector<std::string> names = state_names();
  for (size_t i = 0; i < num_params(); ++i) {
    std::vector<std::string> given_names;
    for (const auto& sn : names) {
      std::string name = "state." + std::to_string(i) + "." + sn;
      const Tensor* t = take(name);
      if (!t) continue;
      given_names.push_back(sn);
      const Tensor& p = param_at(i);
      if (sn == "step") {
        TANDEM_CHECK(t->numel() == 1, "{}::load_state_tensors: '{}' has shape {}, expected a scalar", type_name(),
                     name, shape_str(t->shape()));
      } else {
        TANDEM_CHECK(t->shape() == p.shape(), "{}::load_state_tensors: '{}' has shape {} but parameter {} has {}",
                     type_name(), name, shape_str(t->shape()), i, shape_str(p.shape()));
        TANDEM_CHECK(t->dtype() == p.dtype(), "{}::load_state_tensors: '{}' has dtype {} but parameter {} has {}",
                     type_name(), name, dtype_name(t->dtype()), i, dtype_name(p.dtype()));
      }
      entries.push_back({i, {sn, t}});
    }
    check_loaded_state(i, given_names);
  }
  if (!given.empty())
    TANDEM_FAIL(Value, "{}::load_state_tensors: unexpected entry '{}' (not state of this optimizer with {} "
                "parameters)", type_name(), given.begin()->first, num_params());

  step_count_ = static_cast<int64_t>(step->to_vector<int64_t>()[0]);
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].lr = lrs[g]->to_vector<double>()[0];
  NoGradGuard no_grad;
  for (size_t i = 0; i < num_params(); ++i) reset_param_state(i);
  for (const auto& [i, e] : entries) set_param_state(i, e.first, *e.second);
}

}  // namespace tandem::nn
