// Dropout kernel table: one Philox draw decides the mask, so forward and backward (and a replay under
// gradient checkpointing, and the CUDA backend) agree without storing it.
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// dst[i] = philox_uniform(seed, offset, i) >= float(p) ? src[i] * scale : 0 (the comparison in f32
// on every backend), with scale = 1 / (1 - p) computed in the accumulation type (f32 for f16/bf16/f32, f64 for f64). src, dst: same floating
// dtype, numel and device, contiguous. Used for forward (src = x) and backward (src = dy).
TANDEM_KERNEL(dropout_apply, void(const Tensor& src, Tensor& dst, double p, uint64_t seed, uint64_t offset));

}  // namespace tandem::kernels
