// Autocast: thread-local state, the casting policy and the per-scope cast cache.
// Policy (as PyTorch's): LowPrecision ops (matmul, linear, conv) cast f32 inputs to the guard's
// dtype; Float32 ops (softmax, log_softmax, losses, norms, reductions) cast f16/bf16 inputs to f32.
// f64 is never cast, integer tensors never. Casts of f32 leaves that require grad (parameters) are
// cached for the outermost scope, so a weight used by several ops is cast once per step.
#include "runtime/autocast.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/core.h"
#include "runtime/backend/multi_tensor.h"

namespace tandem {

namespace {
thread_local std::optional<DType> t_autocast;
thread_local int t_depth = 0;

struct CacheKey {
  const TensorImpl* impl;
  DType dtype;
  bool grad_enabled;  // a cast made under NoGradGuard has no history: never reuse it with grad on
  bool operator<(const CacheKey& o) const {
    return std::tie(impl, dtype, grad_enabled) < std::tie(o.impl, o.dtype, o.grad_enabled);
  }
};
struct CacheEntry {
  std::weak_ptr<TensorImpl> source;  // detects a freed-and-reused address
  Tensor cast;
};
thread_local std::map<CacheKey, CacheEntry> t_cache;
thread_local AutocastStats t_stats;

// The differentiable cast itself: the gradient flows back cast to the source dtype; to a leaf (a
// parameter) it flows back as it is, and the leaf's accumulation widens it as it adds it to .grad
// (one pass over the gradient instead of a cast, then an add), or the op's backward adds it to the
// f32 .grad itself (gradient_sink: a weight gradient's GEMM with an f32 C).
Tensor record_cast(const Tensor& t, const Tensor& out) {
  if (t.is_leaf()) return record_leaf_cast(t, out);
  DType src = t.dtype();
  return record("AutocastCast", {t}, out, [src](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor back = Tensor::empty(g[0].shape(), src, g[0].device());
    kernels::cast(g[0].device())(g[0], back);
    return {back};
  });
}

Tensor cast_with_grad(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  kernels::cast(t.device())(t, out);
  return record_cast(t, out);
}

bool eligible(const Tensor& t) { return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::f64; }
// Parameters: their casts live until the outermost guard exits.
bool cacheable(const Tensor& t) {
  return t_depth > 0 && t.is_leaf() && t.requires_grad() && t.dtype() == DType::f32;
}
}  // namespace

std::optional<DType> autocast_dtype() { return t_autocast; }

DType autocast_target(DType input, AutocastCategory category) {
  if (!t_autocast || !is_floating(input) || input == DType::f64) return input;
  return category == AutocastCategory::LowPrecision ? *t_autocast : DType::f32;
}

Tensor autocast_arg(const Tensor& t, AutocastCategory category) {
  if (!t_autocast || !eligible(t)) return t;
  DType want = autocast_target(t.dtype(), category);
  if (want == t.dtype()) return t;
  if (!cacheable(t)) {
    ++t_stats.casts;
    return cast_with_grad(t, want);
  }
  CacheKey key{t.impl(), want, GradMode::is_enabled()};
  auto it = t_cache.find(key);
  if (it != t_cache.end() && it->second.source.lock() == t.impl_ptr()) {
    ++t_stats.cache_hits;
    return it->second.cast;
  }
  ++t_stats.casts;
  Tensor c = cast_with_grad(t, want);
  t_cache[key] = CacheEntry{t.impl_ptr(), c};
  return c;
}

void autocast_prefetch(const std::vector<Tensor>& params) {
  if (!t_autocast) return;
  const DType want = *t_autocast;
  std::vector<Tensor> todo;
  for (const Tensor& t : params) {
    if (!eligible(t) || !cacheable(t)) continue;
    auto it = t_cache.find(CacheKey{t.impl(), want, GradMode::is_enabled()});
    if (it == t_cache.end() || it->second.source.lock() != t.impl_ptr()) todo.push_back(t);
  }
  while (!todo.empty()) {  // one list per device
    const Device device = todo[0].device();
    std::vector<Tensor> src, dst, rest;
    for (const Tensor& t : todo) {
      if (t.device() != device) {
        rest.push_back(t);
      } else if (std::find_if(src.begin(), src.end(), [&](const Tensor& s) { return s.impl() == t.impl(); }) ==
                 src.end()) {
        src.push_back(t);
        dst.push_back(Tensor::empty(t.shape(), want, device));
      }
    }
    kernels::multi_tensor_cast(device)(src, dst);
    for (size_t i = 0; i < src.size(); ++i) {
      ++t_stats.casts;
      t_cache[CacheKey{src[i].impl(), want, GradMode::is_enabled()}] = CacheEntry{src[i].impl_ptr(),
                                                                                 record_cast(src[i], dst[i])};
    }
    todo = std::move(rest);
  }
}

void autocast_clear_cache() { t_cache.clear(); }
AutocastStats autocast_stats() { return t_stats; }
void autocast_reset_stats() { t_stats = {}; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : prev_(t_autocast) {
  TANDEM_CHECK(!enabled || is_low_precision(dtype),
               "AutocastGuard: dtype {} is not a low precision (use f16 or bf16)", dtype_name(dtype));
  // enabled=false turns autocast off inside the scope (PyTorch's autocast(enabled=False)).
  t_autocast = enabled ? std::optional<DType>(dtype) : std::nullopt;
  ++t_depth;
}

AutocastGuard::~AutocastGuard() {
  t_autocast = prev_;
  // Leaving the outermost scope ends the step: parameters may change now, drop their casts.
  if (--t_depth == 0) t_cache.clear();
}

}  // namespace tandem
