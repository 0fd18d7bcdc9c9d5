// Convolution, NCHW.
#pragma once
#include <array>

#include "runtime/tensor.h"

namespace tandem::ops {

// x [N, C, H, W], weight [O, C, kh, kw], bias [O] (optional) -> [N, O, Ho, Wo]
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});

}  // namespace tandem::ops
