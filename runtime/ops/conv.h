// Convolution, NCHW.
#pragma once
#include <array>

#include "runtime/tensor.h"

namespace tandem::ops {

// x [N, C, H, W], weight [O, C, kh, kw], bias [O] (optional) -> [N, O, Ho, Wo]
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});

// The transposed convolution (conv2d's adjoint in x; nn.ConvTranspose2d, ONNX ConvTranspose):
// x [N, C, H, W], weight [C, O, kh, kw], bias [O] (optional) -> [N, O, Ho, Wo] with
// Ho = (H - 1) * stride - 2 * padding + kh + output_padding (likewise Wo); output_padding < stride.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
                        std::array<int64_t, 2> output_padding = {0, 0});

}  // namespace tandem::ops
