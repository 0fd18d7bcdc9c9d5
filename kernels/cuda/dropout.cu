// Dropout of the CUDA backend: one thread per Philox block of four elements, the same draw
// (kernels/common/philox.h) and scaling as the CPU, so both backends drop the same elements.
#include "kernels/cuda/common.cuh"
#include "runtime/backend/common/philox.h"
#include "runtime/backend/dropout.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

template <class T>
__global__ void dropout_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n, float p, acc_t<T> scale,
                               uint64_t seed, uint64_t offset) {
  using A = acc_t<T>;
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = global_thread(); b < blocks; b += grid_threads()) {
    const Philox4 r = philox4x32_10(seed, static_cast<uint64_t>(b), offset);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = b * 4 + k;
      if (i >= n) break;
      const float u = static_cast<float>(r.v[k] >> 8) * (1.0f / 16777216.0f);  // as philox_uniform
      dst[i] = u >= p ? from_acc<T>(static_cast<A>(to_acc(src[i]) * scale)) : from_acc<T>(A(0));
    }
  }
}

void dropout_apply(const Tensor& src, Tensor& dst, double p, uint64_t seed, uint64_t offset) {
  check_on_device("dropout", src.device(), {&src, &dst});
  TANDEM_CHECK(src.numel() == dst.numel() && src.dtype() == dst.dtype(), "dropout: src {} {} vs dst {} {}",
               dtype_name(src.dtype()), shape_str(src.shape()), dtype_name(dst.dtype()), shape_str(dst.shape()));
  const int64_t n = src.numel();
  if (n == 0) return;
  dispatch_floating(src.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A scale = A(1) / (A(1) - static_cast<A>(p));
    TANDEM_LAUNCH(dropout_kernel<T>, grid_for((n + 3) / 4, kBlock), kBlock, 0, stream_for(src.device()),
                  static_cast<const T*>(src.data_ptr()), static_cast<T*>(dst.data_ptr()), n, static_cast<float>(p),
                  scale, seed, offset);
  });
}

TANDEM_REGISTER_KERNEL(kernels::dropout_apply, kKind, dropout_apply);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
