// EMA of weights through the device-generic kernels (scale, axpy, cast): works on any backend.
#include "nn/ema.h"

#include <map>

#include "runtime/autograd.h"
#include "runtime/backend/core.h"
#include "runtime/backend/optim.h"

namespace tandem::nn {

namespace {
DType shadow_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

void check_same_names(const NamedTensors& shadow, const NamedTensors& model) {
  TANDEM_CHECK(shadow.size() == model.size(), "EMA: the model has {} tensors but the EMA tracks {} (was it made "
               "for another model?)", model.size(), shadow.size());
  for (size_t i = 0; i < shadow.size(); ++i)
    TANDEM_CHECK(shadow[i].first == model[i].first && shadow[i].second.shape() == model[i].second.shape(),
                 "EMA: tensor {} is '{}' {} in the model but '{}' {} in the EMA", i, model[i].first,
                 shape_str(model[i].second.shape()), shadow[i].first, shape_str(shadow[i].second.shape()));
}
}  // namespace

EMA::EMA(const Module& model, const EMAOptions& options) : options_(options) {
  TANDEM_CHECK(options.decay >= 0.0 && options.decay <= 1.0, "EMA: decay {} must be in [0, 1]", options.decay);
  TANDEM_CHECK(options.every >= 1, "EMA: every {} must be >= 1", options.every);
  NoGradGuard no_grad;
  size_t n_params = model.named_parameters().size();
  size_t i = 0;
  for (const auto& [name, t] : model.state_dict()) {
    bool param = i++ < n_params && is_floating(t.dtype());
    Tensor s = Tensor::empty(t.shape(), param ? shadow_dtype(t.dtype()) : t.dtype(), t.device());
    s.copy_(t);
    shadow_.emplace_back(name, s);
    is_param_.push_back(param);
  }
}

void EMA::update(const Module& model) {
  ++steps_;
  if (steps_ % options_.every != 0) return;
  NoGradGuard no_grad;
  NamedTensors state = model.state_dict();
  check_same_names(shadow_, state);
  const double d = options_.decay;
  for (size_t i = 0; i < shadow_.size(); ++i) {
    Tensor& s = shadow_[i].second;
    const Tensor& p = state[i].second;
    if (!is_param_[i]) {
      s.copy_(p);
      continue;
    }
    Tensor src = p;
    if (p.dtype() != s.dtype()) {
      src = Tensor::empty(p.shape(), s.dtype(), p.device());
      kernels::cast(p.device())(p, src);
    }
    // s = d * s + (1 - d) * p
    kernels::optim_scale(s.device())(s, d);
    kernels::axpy(s.device())(s, src, 1.0 - d);
  }
  ++num_updates_;
}

void EMA::copy_to(Module& model) const {
  NoGradGuard no_grad;
  NamedTensors state = model.state_dict();
  check_same_names(shadow_, state);
  for (size_t i = 0; i < shadow_.size(); ++i) state[i].second.copy_(shadow_[i].second);
}

EMA::Scope::Scope(const EMA& ema, Module& model) : model_(model) {
  for (const auto& [name, t] : model.state_dict()) saved_.emplace_back(name, t.clone());
  ema.copy_to(model);
}

EMA::Scope::~Scope() {
  NoGradGuard no_grad;
  NamedTensors state = model_.state_dict();
  for (size_t i = 0; i < state.size() && i < saved_.size(); ++i) state[i].second.copy_(saved_[i].second);
}

NamedTensors EMA::state_tensors() const {
  NamedTensors out;
  for (const auto& [name, t] : shadow_) out.emplace_back(name, t.clone());
  out.emplace_back("__steps", Tensor::scalar(static_cast<double>(steps_), DType::i64));
  out.emplace_back("__num_updates", Tensor::scalar(static_cast<double>(num_updates_), DType::i64));
  return out;
}

void EMA::load_state_tensors(const NamedTensors& state) {
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  TANDEM_CHECK(by_name.size() == shadow_.size() + 2, "EMA::load_state_tensors: {} entries given, the EMA has {} "
               "tensors plus __steps and __num_updates", by_name.size(), shadow_.size());
  for (const char* k : {"__steps", "__num_updates"})
    TANDEM_CHECK(by_name.count(k), "EMA::load_state_tensors: missing entry '{}'", k);
  for (const auto& [name, s] : shadow_) {
    auto it = by_name.find(name);
    TANDEM_CHECK(it != by_name.end(), "EMA::load_state_tensors: missing entry '{}'", name);
    TANDEM_CHECK(it->second.shape() == s.shape() && it->second.dtype() == s.dtype(),
                 "EMA::load_state_tensors: '{}' is {} {} but the EMA holds {} {}", name,
                 dtype_name(it->second.dtype()), shape_str(it->second.shape()), dtype_name(s.dtype()),
                 shape_str(s.shape()));
  }
  NoGradGuard no_grad;
  for (auto& [name, s] : shadow_) s.copy_(by_name.at(name));
  steps_ = by_name.at("__steps").to_vector<int64_t>()[0];
  num_updates_ = by_name.at("__num_updates").to_vector<int64_t>()[0];
}

}  // namespace tandem::nn
