// Module registry, state_dict, the default forwards and deep copy (both clone paths and the check
// that a clone does not alias the original).
#include "nn/module.h"

#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "runtime/autograd.h"
#include "runtime/tensor_impl.h"

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
// The module whose default forward_many runs on this thread: its default forward then knows that
// neither is overridden (and fails instead of recursing without end).
thread_local const Module* in_default_forward_many = nullptr;

// Up to four names, then how many more.
std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 4; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 4) out += fmt::format(" and {} more", names.size() - 4);
  return out;
}
}  // namespace

Tensor Module::forward(const Tensor& x) {
  TANDEM_CHECK(in_default_forward_many != this,
               "{} overrides neither forward(x) nor forward_many(inputs); a module must override one of them",
               type_name());
  std::vector<Tensor> out = forward_many({x});
  TANDEM_CHECK(out.size() == 1, "{}: forward(x) returns one tensor, but its forward_many returned {}; call forward_many",
               type_name(), out.size());
  return out[0];
}

std::vector<Tensor> Module::forward_many(const std::vector<Tensor>& inputs) {
  TANDEM_CHECK(inputs.size() == 1,
               "{} takes one input (forward(x)), but forward_many got {}; a module taking several inputs overrides "
               "forward_many",
               type_name(), inputs.size());
  struct Mark {
    const Module* prev;
    explicit Mark(const Module* m) : prev(in_default_forward_many) { in_default_forward_many = m; }
    ~Mark() { in_default_forward_many = prev; }
  } mark(this);
  return {forward(inputs[0])};
}

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

void Module::clear_registry() {
  params_.clear();
  buffers_.clear();
  children_.clear();
}

void Module::copy_state_from(const Module& original) {
  const std::string who = original.type_name();
  // 1. The same tree of modules, each of the same type; the training flags.
  std::map<std::string, const Module*> theirs;
  std::map<std::string, Module*> ours;
  std::function<void(const Module&, const std::string&)> walk_theirs = [&](const Module& m, const std::string& p) {
    theirs[p] = &m;
    for (const auto& [n, c] : m.children_) walk_theirs(*c, p.empty() ? n : p + "." + n);
  };
  walk_theirs(original, "");
  apply([&](const std::string& p, Module& m) { ours[p] = &m; });
  for (const auto& [path, m] : theirs) {
    auto it = ours.find(path);
    TANDEM_CHECK(it != ours.end(), "{}::clone: reset() did not build the child '{}' ({}) that the original has; "
                 "reset() must build every submodule the constructor does", who, path, m->type_name());
    // A child swapped after construction (replace_module, convert_sync_batchnorm) is not what reset() builds.
    TANDEM_CHECK(it->second->type_name() == m->type_name(),
                 "{}::clone: the original's '{}' is a {} but reset() builds a {}; a child swapped after "
                 "construction cannot be rebuilt by reset(): clone before swapping, or swap in reset()",
                 who, path, m->type_name(), it->second->type_name());
    it->second->training_ = m->training_;
  }
  for (const auto& [path, m] : ours)
    TANDEM_CHECK(theirs.count(path), "{}::clone: reset() built a child '{}' ({}) that the original does not have",
                 who, path, m->type_name());

  // 2. Values by name, onto the tensors reset() made: every handle to them (the members reset()
  // assigned) sees the values, dtype and device of the original's.
  NoGradGuard no_grad;
  NamedTensors src_state = original.state_dict(), dst_state = state_dict();
  std::unordered_map<std::string, Tensor*> dst;
  for (auto& [n, t] : dst_state) dst[n] = &t;
  for (const auto& [name, src] : src_state) {
    auto it = dst.find(name);
    TANDEM_CHECK(it != dst.end(), "{}::clone: reset() did not build '{}' ({}) that the original has", who, name,
                 src.defined() ? shape_str(src.shape()) : std::string("undefined"));
    Tensor& t = *it->second;
    TANDEM_CHECK(src.defined() == t.defined(), "{}::clone: '{}' is {} in the original but {} after reset()", who,
                 name, src.defined() ? "defined" : "undefined", t.defined() ? "defined" : "undefined");
    dst.erase(it);
    if (!src.defined()) continue;
    TANDEM_CHECK(src.shape() == t.shape(), "{}::clone: reset() built '{}' with shape {}, but the original's is {}",
                 who, name, shape_str(t.shape()), shape_str(src.shape()));
    move_in_place(t, src.detach().clone());
    t.set_requires_grad(src.requires_grad());
  }
  TANDEM_CHECK(dst.empty(), "{}::clone: reset() built '{}' that the original does not have", who,
               dst.empty() ? std::string() : dst.begin()->first);
}

namespace detail {

CloneAliasCheck::CloneAliasCheck(const Module& original) {
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (const auto& [n, c] : m.children()) {
      const std::string path = prefix.empty() ? n : prefix + "." + n;
      children_.push_back({path, c, c.use_count()});
      walk(*c, path);
    }
  };
  walk(original, "");
  auto note = [&](const NamedTensors& ts) {
    for (const auto& [n, t] : ts)
      if (t.defined()) tensors_.push_back({n, t.impl_ptr(), t.impl_ptr().use_count()});
  };
  // Counted with the state_dict's own handles released (their temporary copies are gone when
  // note() returns, so each count is the tree's alone).
  note(original.named_parameters());
  note(original.named_buffers());
  for (Watched& w : tensors_) w.count = w.ptr.use_count();
}

void CloneAliasCheck::check(const std::string& type, bool has_reset) const {
  std::vector<std::string> kids, tensors;
  for (const Watched& w : children_)
    if (w.ptr.use_count() > w.count) kids.push_back(w.name);
  for (const Watched& w : tensors_)
    if (w.ptr.use_count() > w.count) tensors.push_back(w.name);
  if (kids.empty() && tensors.empty()) return;
  std::string what;
  if (!kids.empty()) what = fmt::format("submodule{} {}", kids.size() > 1 ? "s" : "", list_names(kids));
  if (!tensors.empty())
    what += fmt::format("{}tensor{} {}", what.empty() ? "" : " and ", tensors.size() > 1 ? "s" : "",
                        list_names(tensors));
  if (has_reset)
    TANDEM_FAIL(Value,
                "{}::clone: after reset() the copy still holds the original's {} in its members: reset() must "
                "(re)assign every member that holds a submodule or tensor, so build them all in reset(), not in "
                "the constructor",
                type, what);
  TANDEM_FAIL(Value,
              "{}::clone: the copy's members still hold the original's {} (copy-construction copies member "
              "shared_ptrs and Tensors as they are), so the clone would run the original's weights. Build the "
              "submodules in `void reset() override`, called from the constructor (clone() then rebuilds them "
              "for the copy), or reach them through the registry (children(), param(\"name\")) instead of members",
              type, what);
}

}  // namespace detail

}  // namespace tandem::nn
