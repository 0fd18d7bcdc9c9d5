// Shape kernels of the CUDA backend: permute (strided_gather.cuh: coalesced writes, up to 16 bytes
// a thread where the last dim stays last) and the strided block copy behind concat.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/strided_gather.cuh"
#include "runtime/backend/shape.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

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
  TANDEM_CHECK(r <= static_cast<size_t>(kGatherMaxDims) && r == static_cast<size_t>(src.dim()),
               "permute: {} dims for a tensor of shape {}", r, shape_str(src.shape()));
  GatherPlan p;
  p.rank = static_cast<int>(r);
  int64_t st[kGatherMaxDims], s = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = s;
    s *= src.shape()[d];
  }
  for (size_t d = 0; d < r; ++d) {
    p.size[d] = dst.shape()[d];
    p.stride[d] = st[perm[d]];
  }
  strided_gather(src.data_ptr(), dst.data_ptr(), src.element_size(), p, stream_for(src.device()));
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
