// Differentiable reductions.
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

Tensor sum(const Tensor& a);                                  // all elements -> scalar (shape [])
Tensor sum(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t dim, bool keepdim = false);
// Not differentiable: index of the max along dim (i64), for accuracy.
Tensor argmax(const Tensor& a, int64_t dim);

}  // namespace tandem::ops
