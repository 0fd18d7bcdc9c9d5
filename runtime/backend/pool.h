// Pooling kernel tables (NCHW, floor output size, no dilation).
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// x [n, c, h, w] -> y [n, c, ho, wo], ho = (h + 2 ph - kh) / sh + 1 (likewise wo); ph <= kh / 2.
struct Pool2dGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t ho = 0, wo = 0;
};

// All tensors contiguous on one device; x, y, dx, dy share a floating dtype (16-bit types compare
// and accumulate in f32). Outputs are fully overwritten.
// Max: padding acts as -inf; NaN wins (propagates). argmax [n, c, ho, wo] i32 holds the index
// iy * w + ix of the chosen input within its [h, w] plane (the first maximum in row-major window order).
TANDEM_KERNEL(max_pool2d_forward, void(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2dGeometry& g));
// dx [n, c, h, w] = scatter-add of dy at argmax (overlapping windows add up).
TANDEM_KERNEL(max_pool2d_backward,
              void(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2dGeometry& g));
// Avg: padding counts as zeros in the divisor kh * kw (PyTorch count_include_pad = true).
TANDEM_KERNEL(avg_pool2d_forward, void(const Tensor& x, Tensor& y, const Pool2dGeometry& g));
TANDEM_KERNEL(avg_pool2d_backward, void(const Tensor& dy, Tensor& dx, const Pool2dGeometry& g));

}  // namespace tandem::kernels
