// Pooling, NCHW.
#pragma once
#include <array>

#include "runtime/tensor.h"

namespace tandem::ops {

// stride 0 means stride = kernel (PyTorch's default). Padding is -inf (max) or zero (avg, counted
// in the divisor as PyTorch's count_include_pad=true).
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0});

}  // namespace tandem::ops
