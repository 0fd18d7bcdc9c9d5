// Embedding lookup.
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

// indices (i32/i64) of any shape, weight [V, D] -> [..., D]
Tensor embedding(const Tensor& indices, const Tensor& weight);

}  // namespace tandem::ops
