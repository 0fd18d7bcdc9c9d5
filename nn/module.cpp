// Module registry, state_dict and deep copy.
#include "nn/module.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "runtime/autograd.h"

namespace tandem::nn {

namespace {
// Points every handle of `t` at new storage (to a device or dtype) without changing its identity.
void move_in_place(Tensor& t, const Tensor& moved) {
  TensorImpl* impl = t.impl();
  impl->storage = moved.storage();
  impl->offset = moved.storage_offset();
  impl->dtype = moved.dtype();
  if (impl->grad) {
    Tensor g(impl->grad);
    Tensor gm = g.device() == moved.device() && g.dtype() == moved.dtype() ? g : Tensor::empty(g.shape(), moved.dtype(), moved.device());
    if (!gm.is_same(g)) gm.copy_(g);
    impl->grad = gm.impl_ptr();
  }
}
}  // namespace

NamedTensors Module::named_tensors(NamedTensors Module::*own) const {
  NamedTensors out = this->*own;
  for (const auto& [cname, child] : children_)
    for (auto& [n, t] : child->named_tensors(own)) out.emplace_back(cname + "." + n, t);
  return out;
}

// A tensor registered in several modules (a tied embedding and output projection) is one parameter:
// listed once, under its first name, so optimizers step it once and DDP reduces it once.
NamedTensors Module::named_parameters() const {
  NamedTensors all = named_tensors(&Module::params_), out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& nt : all)
    if (!nt.second.defined() || seen.insert(nt.second.impl()).second) out.push_back(std::move(nt));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const { return named_tensors(&Module::buffers_); }

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& nt : named_buffers()) out.push_back(nt);
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  NamedTensors mine = state_dict();
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  NoGradGuard ng;
  for (auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      TANDEM_CHECK(!strict, "load_state_dict: missing entry '{}' (shape {})", name, shape_str(t.shape()));
      continue;
    }
    const Tensor& src = *it->second;
    TANDEM_CHECK(src.shape() == t.shape(), "load_state_dict: '{}' has shape {} in the state but {} in the model",
                 name, shape_str(src.shape()), shape_str(t.shape()));
    TANDEM_CHECK(src.dtype() == t.dtype(), "load_state_dict: '{}' has dtype {} in the state but {} in the model",
                 name, dtype_name(src.dtype()), dtype_name(t.dtype()));
    t.copy_(src);
    given.erase(it);
  }
  if (strict && !given.empty())
    TANDEM_FAIL(Value, "load_state_dict: unexpected entry '{}' not in the model", given.begin()->first);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters())
    if (p.grad().defined()) p.grad().zero_();
}

void Module::to(Device device) {
  for (auto& [n, t] : params_) move_in_place(t, t.to(device));
  for (auto& [n, t] : buffers_) move_in_place(t, t.to(device));
  for (auto& [n, c] : children_) c->to(device);
}

void Module::to(DType dtype) {
  auto convert = [&](Tensor& t) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) return;
    Tensor c = Tensor::empty(t.shape(), dtype, t.device());
    c.copy_(t);
    move_in_place(t, c);
  };
  for (auto& [n, t] : params_) convert(t);
  for (auto& [n, t] : buffers_) convert(t);
  for (auto& [n, c] : children_) c->to(dtype);
}

Tensor& Module::param(const std::string& name) {
  for (auto& [n, t] : params_)
    if (n == name) return t;
  TANDEM_FAIL(Value, "{} has no parameter '{}'", type_name(), name);
}

bool Module::has_param(const std::string& name) const {
  for (auto& [n, t] : params_)
    if (n == name) return true;
  return false;
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  TANDEM_FAIL(Value, "{} has no buffer '{}'", type_name(), name);
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn, const std::string& prefix) {
  fn(prefix, *this);
  for (auto& [n, c] : children_) c->apply(fn, prefix.empty() ? n : prefix + "." + n);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  if (t.defined()) t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, t);
  return buffers_.back().second;
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  for (auto& [n, c] : children_)
    if (n == name) {
      c = std::move(m);
      return;
    }
  TANDEM_FAIL(Value, "{} has no child '{}'", type_name(), name);
}

void Module::deep_copy_state() {
  for (auto& [n, t] : params_) {
    if (!t.defined()) continue;
    Tensor c = t.detach().clone();
    c.set_requires_grad(true);
    t = c;
  }
  for (auto& [n, t] : buffers_)
    if (t.defined()) t = t.detach().clone();
  for (auto& [n, c] : children_) c = c->clone();
}

}  // namespace tandem::nn
