// CPU kernels behind Tensor: fill, copy, cast, axpy.
#include <algorithm>
#include <cstring>

#include "runtime/backend/core.h"

namespace tandem::kernels {
namespace {

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

void cpu_fill(Tensor& dst, double value) {
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = from_double<T>(value);
    std::fill_n(static_cast<T*>(dst.data_ptr()), dst.numel(), v);
  });
}

void cpu_copy(const Tensor& src, Tensor& dst) {
  TANDEM_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
               "copy: src {} {} vs dst {} {}", dtype_name(src.dtype()), shape_str(src.shape()),
               dtype_name(dst.dtype()), shape_str(dst.shape()));
  if (src.nbytes() > 0 && src.data_ptr() != dst.data_ptr()) std::memmove(dst.data_ptr(), src.data_ptr(), src.nbytes());
}

void cpu_cast(const Tensor& src, Tensor& dst) {
  convert_host(src.data_ptr(), src.dtype(), dst.data_ptr(), dst.dtype(), src.numel());
}

// dst = a + alpha * src, element by element (a may be dst).
void axpy_into(const Tensor& a, const Tensor& src, double alpha, Tensor& dst) {
  dispatch_axpy(dst, src, [&](auto dtag, auto stag) {
    using D = decltype(dtag);
    using S = decltype(stag);
    using A = acc_t<D>;
    D* d = static_cast<D*>(dst.data_ptr());
    const D* x = static_cast<const D*>(a.data_ptr());
    const S* s = static_cast<const S*>(src.data_ptr());
    const A al = static_cast<A>(alpha);
    const int64_t n = dst.numel();
    for (int64_t i = 0; i < n; ++i) d[i] = D(static_cast<A>(x[i]) + al * static_cast<A>(static_cast<acc_t<S>>(s[i])));
  });
}

void cpu_axpy(Tensor& dst, const Tensor& src, double alpha) { axpy_into(dst, src, alpha, dst); }

void cpu_axpy_out(const Tensor& a, const Tensor& src, double alpha, Tensor& out) {
  check_axpy_out(a, out);
  axpy_into(a, src, alpha, out);
}

TANDEM_REGISTER_KERNEL(fill, DeviceKind::CPU, cpu_fill);
TANDEM_REGISTER_KERNEL(copy, DeviceKind::CPU, cpu_copy);
TANDEM_REGISTER_KERNEL(cast, DeviceKind::CPU, cpu_cast);
TANDEM_REGISTER_KERNEL(axpy, DeviceKind::CPU, cpu_axpy);
TANDEM_REGISTER_KERNEL(axpy_out, DeviceKind::CPU, cpu_axpy_out);

}  // namespace
}  // namespace tandem::kernels
