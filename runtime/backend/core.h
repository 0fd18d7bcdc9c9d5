// Kernels every backend provides for the Tensor class itself: fill, copy, dtype cast.
#pragma once
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// dst[i] = value (converted to dst's dtype).
TANDEM_KERNEL(fill, void(Tensor& dst, double value));
// Byte copy of src into dst: same dtype and numel, devices may differ. The slot used is the
// non-CPU device's kind (CPU when both are CPU).
TANDEM_KERNEL(copy, void(const Tensor& src, Tensor& dst));
// dst[i] = convert(src[i]): same device and numel, any two dtypes.
TANDEM_KERNEL(cast, void(const Tensor& src, Tensor& dst));
// dst += alpha * src: same device and numel; same dtype, or both floating (src converted: a 16-bit
// gradient added to an f32 one in one pass). Gradient accumulation, optimizers.
TANDEM_KERNEL(axpy, void(Tensor& dst, const Tensor& src, double alpha));

}  // namespace tandem::kernels
