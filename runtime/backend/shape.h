// Shape kernel tables: permute (transpose is a permute) and a strided block copy (concat and its
// backward). Views (reshape, flatten, slice along dim 0) need no kernel.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// dst = src permuted: dst.shape[i] == src.shape[perm[i]], i.e.
// dst[i_0, ..., i_{r-1}] = src[j] with j_{perm[d]} = i_d. Same dtype (any) and device; r <= 8.
TANDEM_KERNEL(permute, void(const Tensor& src, Tensor& dst, const std::vector<int64_t>& perm));

// Copies a [rows, cols] block between row-major matrices laid over the tensors' data (offsets and
// leading dims in elements):  dst[dst_offset + r * dst_ld + c] = src[src_offset + r * src_ld + c].
// Same dtype (any) and device. Concat writes each input into its column range of the output
// (viewed as [outer, n_out * inner]); its backward reads the ranges back.
TANDEM_KERNEL(copy_block, void(const Tensor& src, int64_t src_offset, int64_t src_ld, Tensor& dst,
                               int64_t dst_offset, int64_t dst_ld, int64_t rows, int64_t cols));

}  // namespace tandem::kernels
