// CPU shape kernels: permute (an N-d strided gather) and the strided block copy behind concat.
#include <cstring>

#include "runtime/backend/shape.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

template <class T>
void permute_typed(const Tensor& src, Tensor& dst, const std::vector<int64_t>& perm) {
  const int64_t total = dst.numel();
  if (total == 0) return;
  const size_t r = perm.size();
  TANDEM_CHECK(r <= 8 && r == static_cast<size_t>(src.dim()), "permute: {} dims for a tensor of shape {}", r,
               shape_str(src.shape()));
  // Source strides in destination dim order.
  int64_t src_stride[8], sizes[8];
  {
    int64_t st[8], s = 1;
    for (size_t d = r; d-- > 0;) {
      st[d] = s;
      s *= src.shape()[d];
    }
    for (size_t d = 0; d < r; ++d) {
      src_stride[d] = st[perm[d]];
      sizes[d] = dst.shape()[d];
    }
  }
  const T* ps = static_cast<const T*>(src.data_ptr());
  T* pd = static_cast<T*>(dst.data_ptr());
  if (r == 0) {
    pd[0] = ps[0];
    return;
  }
  const int64_t inner = sizes[r - 1], is = src_stride[r - 1];
  const int64_t rows = total / inner;
  auto do_rows = [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      int64_t rem = q, off = 0;
      for (size_t d = r - 1; d-- > 0;) {
        off += (rem % sizes[d]) * src_stride[d];
        rem /= sizes[d];
      }
      const T* s = ps + off;
      T* o = pd + q * inner;
      for (int64_t i = 0; i < inner; ++i) o[i] = s[i * is];
    }
  };
  if (total >= kParallelMin && rows > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < rows; ++q) do_rows(q, q + 1);
  } else {
    do_rows(0, rows);
  }
}

void cpu_permute(const Tensor& src, Tensor& dst, const std::vector<int64_t>& perm) {
  dispatch(src.dtype(), [&](auto tag) { permute_typed<decltype(tag)>(src, dst, perm); }, "permute");
}

void cpu_copy_block(const Tensor& src, int64_t src_offset, int64_t src_ld, Tensor& dst, int64_t dst_offset,
                    int64_t dst_ld, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const size_t es = src.element_size();
  const char* ps = static_cast<const char*>(src.data_ptr()) + src_offset * static_cast<int64_t>(es);
  char* pd = static_cast<char*>(dst.data_ptr()) + dst_offset * static_cast<int64_t>(es);
  const size_t row_bytes = static_cast<size_t>(cols) * es;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(pd + r * dst_ld * static_cast<int64_t>(es), ps + r * src_ld * static_cast<int64_t>(es), row_bytes);
}

TANDEM_REGISTER_KERNEL(permute, DeviceKind::CPU, cpu_permute);
TANDEM_REGISTER_KERNEL(copy_block, DeviceKind::CPU, cpu_copy_block);

}  // namespace
}  // namespace tandem::kernels
