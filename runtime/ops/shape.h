// Differentiable shape ops. reshape/flatten/slice0 are views (share storage); transpose, permute
// and concat copy.
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
Tensor cast(const Tensor& a, DType dtype);                    // gradient cast back to a's dtype
Tensor to_device(const Tensor& a, Device device);             // gradient moved back

}  // namespace tandem::ops
