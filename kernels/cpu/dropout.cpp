// CPU dropout: the keep mask of element i is philox_uniform(seed, offset, i) >= p, one Philox block
// per four elements, so CPU, CUDA and a checkpoint replay agree.
#include "kernels/cpu/lanes.h"
#include "runtime/backend/common/philox.h"
#include "runtime/backend/dropout.h"

namespace tandem::kernels {
namespace {

void cpu_dropout_apply(const Tensor& src, Tensor& dst, double p, uint64_t seed, uint64_t offset) {
  dispatch_floating(src.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* s = static_cast<const T*>(src.data_ptr());
    T* d = static_cast<T*>(dst.data_ptr());
    const int64_t n = src.numel();
    const float pf = static_cast<float>(p);
    const A scale = A(1) / (A(1) - static_cast<A>(p));
    const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n >= kParallelMinWork)
    for (int64_t b = 0; b < blocks; ++b) {
      const Philox4 r = philox4x32_10(seed, static_cast<uint64_t>(b), offset);
      for (int k = 0; k < 4; ++k) {
        const int64_t i = b * 4 + k;
        if (i >= n) break;
        // Same bits and scaling as philox_uniform.
        const float u = static_cast<float>(r.v[k] >> 8) * (1.0f / 16777216.0f);
        d[i] = u >= pf ? T(static_cast<A>(s[i]) * scale) : T(A(0));
      }
    }
  });
}

TANDEM_REGISTER_KERNEL(dropout_apply, DeviceKind::CPU, cpu_dropout_apply);

}  // namespace
}  // namespace tandem::kernels
