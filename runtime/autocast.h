// Autocast: inside an AutocastGuard, ops cast their floating inputs by category, as PyTorch's policy:
// matmul, linear and conv compute in the low precision (f16/bf16); softmax, log_softmax, losses,
// layer norm and reductions in f32. Batch norm is on neither list (as in PyTorch): it keeps a 16-bit
// input's dtype, computing in f32. Op entry points call autocast_arg on each floating input.
#pragma once
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace tandem {

enum class AutocastCategory { LowPrecision, Float32 };

// The active autocast dtype of this thread, if any.
std::optional<DType> autocast_dtype();

// `t` cast for an op of `category` under the current autocast state; `t` itself when autocast is
// off, when t is not floating, or when it already has the wanted dtype. Differentiable.
// Casts of f32 leaves that require grad (parameters) are cached until the outermost guard exits, so
// wrap the forward pass (not backward and the optimizer step) in the guard, as in PyTorch.
Tensor autocast_arg(const Tensor& t, AutocastCategory category);

// Casts, in one multi-tensor launch per device, those of `params` that autocast_arg would cast and
// cache for a LowPrecision op (f32 leaves requiring grad), and caches them: a model of many small
// weights pays one launch for their casts instead of one each. Nothing outside a guard.
void autocast_prefetch(const std::vector<Tensor>& params);

// The dtype an input of dtype `input` gets for an op of `category` under the current state.
DType autocast_target(DType input, AutocastCategory category);
// Drops this thread's cached casts (the outermost guard's exit does it too).
void autocast_clear_cache();
// This thread's counters: casts made and cache hits (tests check "cast once per step").
struct AutocastStats {
  int64_t casts = 0;
  int64_t cache_hits = 0;
};
AutocastStats autocast_stats();
void autocast_reset_stats();

// AutocastGuard(f16 | bf16): autocast on in the scope; enabled=false turns it off in the scope.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> prev_;
};

}  // namespace tandem
