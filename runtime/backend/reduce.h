// Reduction kernel tables: sum to a broadcast-compatible shape (sum/mean over dims, the gradient
// of broadcasting, a bias gradient), its adjoint expand, and argmax.
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// dst = scale * (src summed over the dims where dst broadcasts): dst's shape must broadcast to
// src's (dst may have fewer dims; size-1 dims are summed). E.g. src [N, C] -> dst [C] (column sum),
// [N, C] -> [N, 1] (row sums), anything -> [] (total). Same dtype and device; accumulates in
// acc_t<T> in a fixed order (results do not depend on the thread count). src with 0 elements
// gives zeros.
TANDEM_KERNEL(sum_to, void(const Tensor& src, Tensor& dst, double scale));

// dst = scale * broadcast(src): src's shape broadcasts to dst's (the adjoint of sum_to; also the
// bias broadcast of linear). Same dtype and device.
TANDEM_KERNEL(expand, void(const Tensor& src, Tensor& dst, double scale));

// src viewed as [outer, n, inner]; dst i64 [outer, inner] = index of the max over n (first one on
// ties; NaN counts as the max). n >= 1. src any non-u8 dtype.
TANDEM_KERNEL(argmax, void(const Tensor& src, Tensor& dst, int64_t outer, int64_t n, int64_t inner));

}  // namespace tandem::kernels
