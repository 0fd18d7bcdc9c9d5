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
// out = a + alpha * src: axpy into another tensor (a and out: same dtype and numel; src as axpy's).
// A residual stream's f32 plus an autocast branch's 16-bit output in one pass, without the cast.
TANDEM_KERNEL(axpy_out, void(const Tensor& a, const Tensor& src, double alpha, Tensor& out));

// axpy's argument check and type dispatch, shared by the backends: f(D{}, S{}) with the C++ types of
// dst and src (equal, or both floating).
template <class F>
void dispatch_axpy(const Tensor& dst, const Tensor& src, F&& f) {
  TANDEM_CHECK(src.numel() == dst.numel() &&
                   (src.dtype() == dst.dtype() || (is_floating(src.dtype()) && is_floating(dst.dtype()))),
               "axpy: dst {} {} vs src {} {} (same numel; dtypes equal or both floating)", dtype_name(dst.dtype()),
               shape_str(dst.shape()), dtype_name(src.dtype()), shape_str(src.shape()));
  dispatch(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    if (src.dtype() == dst.dtype()) return f(dtag, dtag);
    if constexpr (is_floating_type_v<D>) {
      dispatch(src.dtype(), [&](auto stag) {
        if constexpr (is_floating_type_v<decltype(stag)>) f(dtag, stag);
      });
    }
  });
}

// axpy_out's check beyond axpy's (out as dst): a has out's dtype and numel.
inline void check_axpy_out(const Tensor& a, const Tensor& out) {
  TANDEM_CHECK(a.dtype() == out.dtype() && a.numel() == out.numel(), "axpy_out: a {} {} vs out {} {} (same dtype and numel)",
               dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(out.dtype()), shape_str(out.shape()));
}

}  // namespace tandem::kernels
