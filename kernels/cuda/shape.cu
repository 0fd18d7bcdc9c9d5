// Shape kernels of the CUDA backend: permute (an N-d strided gather, one output element per
// thread, coalesced writes) and the strided block copy behind concat.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fast_divmod.h"
#include "runtime/backend/shape.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

constexpr int kMaxDims = 8;

struct PermutePlan {
  int rank;
  int64_t size[kMaxDims];        // dst sizes
  int64_t src_stride[kMaxDims];  // source stride of each dst dim
  FastDivmod fast[kMaxDims];     // size[d], when the tensor has fewer than 2^31 elements
};

// Fast: the dst index's digits by FastDivmod (tensors below 2^31 elements), else by 64-bit division.
template <class T, bool Fast>
__global__ void permute_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n, PermutePlan p) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = src[Fast ? offset_of(static_cast<uint32_t>(i), p.rank, p.fast, p.src_stride)
                      : offset_of(i, p.rank, p.size, p.src_stride)];
}

template <class T>
__global__ void copy_block_kernel(const T* __restrict__ src, int64_t src_ld, T* __restrict__ dst, int64_t dst_ld,
                                  int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * dst_ld + c] = src[r * src_ld + c];
  }
}

// Element types by size only: a permute or a copy moves bits.
template <class F>
void with_bits(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  TANDEM_FAIL(Internal, "no {}-byte element type", element_size);
}

void permute(const Tensor& src, Tensor& dst, const std::vector<int64_t>& perm) {
  check_on_device("permute", src.device(), {&src, &dst});
  const size_t r = perm.size();
  TANDEM_CHECK(r <= static_cast<size_t>(kMaxDims) && r == static_cast<size_t>(src.dim()),
               "permute: {} dims for a tensor of shape {}", r, shape_str(src.shape()));
  const int64_t n = dst.numel();
  if (n == 0) return;
  PermutePlan p{};
  p.rank = static_cast<int>(r);
  int64_t st[kMaxDims], s = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = s;
    s *= src.shape()[d];
  }
  const bool fast = n < int64_t(FastDivmod::kLimit);
  for (size_t d = 0; d < r; ++d) {
    p.size[d] = dst.shape()[d];
    p.src_stride[d] = st[perm[d]];
    if (fast) p.fast[d] = FastDivmod(static_cast<uint32_t>(p.size[d]));
  }
  with_bits(src.element_size(), [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = fast ? permute_kernel<T, true> : permute_kernel<T, false>;
    TANDEM_LAUNCH(kernel, grid_for(n, kBlock), kBlock, 0, stream_for(src.device()),
                  static_cast<const T*>(src.data_ptr()), static_cast<T*>(dst.data_ptr()), n, p);
  });
}

void copy_block(const Tensor& src, int64_t src_offset, int64_t src_ld, Tensor& dst, int64_t dst_offset,
                int64_t dst_ld, int64_t rows, int64_t cols) {
  check_on_device("copy_block", src.device(), {&src, &dst});
  TANDEM_CHECK(src.dtype() == dst.dtype(), "copy_block: dtypes {} and {} differ", dtype_name(src.dtype()),
               dtype_name(dst.dtype()));
  if (rows == 0 || cols == 0) return;
  with_bits(src.element_size(), [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(copy_block_kernel<T>, grid_for(rows * cols, kBlock), kBlock, 0, stream_for(src.device()),
                  static_cast<const T*>(src.data_ptr()) + src_offset, src_ld,
                  static_cast<T*>(dst.data_ptr()) + dst_offset, dst_ld, rows, cols);
  });
}

TANDEM_REGISTER_KERNEL(kernels::permute, kKind, permute);
TANDEM_REGISTER_KERNEL(kernels::copy_block, kKind, copy_block);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
