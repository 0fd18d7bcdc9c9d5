// Autocast: inside an AutocastGuard, ops cast their floating inputs by category, as PyTorch's policy:
// matmul, linear and conv compute in the low precision (f16/bf16); softmax, log_softmax, losses,
// norms and reductions in f32. Op entry points call autocast_arg on each floating input.
#pragma once
#include <optional>

#include "runtime/tensor.h"

namespace tandem {

enum class AutocastCategory { LowPrecision, Float32 };

// The active autocast dtype of this thread, if any.
std::optional<DType> autocast_dtype();

// `t` cast for an op of `category` under the current autocast state; `t` itself when autocast is
// off, when t is not floating, or when it already has the wanted dtype. Differentiable.
Tensor autocast_arg(const Tensor& t, AutocastCategory category);

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
