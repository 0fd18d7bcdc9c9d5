// Convolution kernel tables (NCHW). Two levels: the whole-op level (conv2d_forward /
// backward_input / backward_weight), which the CPU fills with im2col + GEMM and CUDA may fill with
// cuDNN, and the im2col / col2im building blocks behind the GEMM path.
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// Shapes of one convolution: x [n, c, h, w], weight [o, c, kh, kw], y [n, o, ho, wo] with
// ho = (h + 2 ph - kh) / sh + 1 (likewise wo). Computed and checked by ops::conv2d.
struct Conv2dGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t o = 0, kh = 0, kw = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t ho = 0, wo = 0;
  int64_t k() const { return c * kh * kw; }  // GEMM inner dimension
  int64_t l() const { return ho * wo; }      // output pixels per image
};

// ---- whole-op level: all tensors contiguous, same device and dtype (f32, f64, f16, bf16; 16-bit
// types compute in f32). Outputs are allocated by the caller and fully overwritten.
// y [n, o, ho, wo] = conv(x [n, c, h, w], w [o, c, kh, kw]) + b [o] (b undefined: no bias)
TANDEM_KERNEL(conv2d_forward,
              void(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2dGeometry& g));
// dx [n, c, h, w] from dy [n, o, ho, wo] and w [o, c, kh, kw]
TANDEM_KERNEL(conv2d_backward_input,
              void(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dGeometry& g));
// dw [o, c, kh, kw] and db [o] (undefined: skipped) from x [n, c, h, w] and dy [n, o, ho, wo]
TANDEM_KERNEL(conv2d_backward_weight,
              void(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor& db, const Conv2dGeometry& g));

// ---- im2col level: raw pointers of `dtype` (f32 or f64) on `device`; g.n is the number of images
// in this call (callers may process a batch in chunks).
// cols [c*kh*kw, n*ho*wo]: row (ci*kh + i)*kw + j, column img*ho*wo + oy*wo + ox holds
// x[img, ci, oy*sh - ph + i, ox*sw - pw + j], zero where that falls in the padding.
TANDEM_KERNEL(im2col, void(Device device, DType dtype, const Conv2dGeometry& g, const void* x, void* cols));
// The adjoint of im2col: x [n, c, h, w] = sum of the cols entries that im2col read from each pixel.
// x is overwritten (not accumulated into).
TANDEM_KERNEL(col2im, void(Device device, DType dtype, const Conv2dGeometry& g, const void* cols, void* x));

}  // namespace tandem::kernels
