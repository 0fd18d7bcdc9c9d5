// dst[i] = src[offset of dst's index i through per-dim source strides]: the copy behind permute
// (strides permuted) and expand (stride 0 on broadcast dims). It moves bits, so elements are typed
// by size only, and where the innermost dim is contiguous in the source (stride 1) a thread moves
// up to 16 bytes of it at once: the GPT's head split/merge permutes and its bias broadcasts moved
// 2-byte elements one index computation each, several times off the memory bandwidth.
#pragma once
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fast_divmod.h"

namespace tandem::TANDEM_CUDA_NS {

constexpr int kGatherMaxDims = 8;

struct GatherPlan {
  int rank = 0;
  int64_t size[kGatherMaxDims] = {};    // dst sizes
  int64_t stride[kGatherMaxDims] = {};  // source stride of each dst dim (0: broadcast)
  FastDivmod fast[kGatherMaxDims];      // size[d], when dst has fewer than 2^31 elements
};

// p.fast from p.size; whether the kernels may use it (fewer than 2^31 elements).
inline bool set_fast_divmods(GatherPlan& p, int64_t n) {
  const bool fast = n < int64_t(FastDivmod::kLimit);
  if (fast)
    for (int d = 0; d < p.rank; ++d) p.fast[d] = FastDivmod(static_cast<uint32_t>(p.size[d]));
  return fast;
}

// The source offset of dst's flat index i. Fast: the index's digits by FastDivmod, else by 64-bit
// division.
template <bool Fast>
__device__ __forceinline__ int64_t gather_offset(int64_t i, const GatherPlan& p) {
  return Fast ? offset_of(static_cast<uint32_t>(i), p.rank, p.fast, p.stride) : offset_of(i, p.rank, p.size, p.stride);
}

template <class U, bool Fast>
__global__ void strided_gather_kernel(const U* __restrict__ src, U* __restrict__ dst, int64_t n, GatherPlan p) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = src[gather_offset<Fast>(i, p)];
}

struct alignas(16) Bytes16 {
  uint32_t v[4];
};

// Runs the gather of `element_size`-byte elements under plan p (sizes and strides in elements).
// While the innermost dim has source stride 1 and an even size, every other stride is even and
// both pointers allow it, pairs of elements become one element of twice the size, up to 16 bytes.
inline void strided_gather(const void* src, void* dst, size_t element_size, GatherPlan p, Stream stream) {
  int64_t n = 1;
  for (int d = 0; d < p.rank; ++d) n *= p.size[d];
  if (n == 0) return;
  const int last = p.rank - 1;
  auto widenable = [&] {
    if (p.rank == 0 || element_size >= 16 || p.stride[last] != 1 || p.size[last] % 2 != 0) return false;
    if (!aligned_to(src, 2 * element_size) || !aligned_to(dst, 2 * element_size)) return false;
    for (int d = 0; d < last; ++d)
      if (p.stride[d] % 2 != 0) return false;
    return true;
  };
  while (widenable()) {
    element_size *= 2;
    n /= 2;
    p.size[last] /= 2;
    for (int d = 0; d < last; ++d) p.stride[d] /= 2;
  }
  const bool fast = set_fast_divmods(p, n);
  auto run = [&](auto tag) {
    using U = decltype(tag);
    const auto kernel = fast ? strided_gather_kernel<U, true> : strided_gather_kernel<U, false>;
    TANDEM_LAUNCH(kernel, grid_for(n, kBlock), kBlock, 0, stream, static_cast<const U*>(src), static_cast<U*>(dst), n, p);
  };
  switch (element_size) {
    case 1: return run(uint8_t{});
    case 2: return run(uint16_t{});
    case 4: return run(uint32_t{});
    case 8: return run(uint64_t{});
    case 16: return run(Bytes16{});
  }
  TANDEM_FAIL(Internal, "strided_gather: no {}-byte element type", element_size);
}

}  // namespace tandem::TANDEM_CUDA_NS
