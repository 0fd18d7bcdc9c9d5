// Differentiable shape ops. reshape/flatten/slice0 are views (share storage); transpose, permute,
// concat and slice along an inner dim copy.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace tandem::ops {

Tensor reshape(const Tensor& a, const Shape& shape);  // one -1 allowed
Tensor flatten(const Tensor& a, int64_t start_dim = 1, int64_t end_dim = -1);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor slice0(const Tensor& a, int64_t start, int64_t end);  // rows [start, end) along dim 0
// Indices [start, end) along `dim` (negative: from the end), 0 <= start <= end <= a.size(dim): a
// view where the slice is contiguous (dim 0, or only size-1 dims before it), a copy otherwise; the
// gradient is g in that range and zeros elsewhere. Splits a packed input into its columns:
// slice(x, -1, 0, 3) and slice(x, -1, 3, 5) of x [B, 5].
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);  // slice(a, dim, start, start + length)
Tensor cast(const Tensor& a, DType dtype);                    // gradient cast back to a's dtype
Tensor to_device(const Tensor& a, Device device);             // gradient moved back

}  // namespace tandem::ops
