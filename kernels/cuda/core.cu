// CUDA-backend kernels behind Tensor: fill, copy (host<->device through backend.h), cast, axpy.
#include "kernels/cuda/common.cuh"
#include "runtime/backend/core.h"

namespace tandem::TANDEM_CUDA_NS {

void check_on_device(const char* what, Device device, std::initializer_list<const Tensor*> tensors) {
  TANDEM_CHECK(device.kind == kKind, "{}: expected a {} device, got {}", what, device_kind_name(kKind), device.str());
  for (const Tensor* t : tensors)
    if (t->defined())
      TANDEM_CHECK(t->device() == device, "{}: tensor on {} where {} was expected", what, t->device().str(),
                   device.str());
}

namespace {

// Through float for the 16-bit types, through a plain conversion otherwise (as convert_host).
template <class S, class D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    if constexpr (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>) dst[i] = D(static_cast<float>(src[i]));
    else if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>) dst[i] = static_cast<D>(static_cast<float>(src[i]));
    else dst[i] = static_cast<D>(src[i]);
  }
}

template <class T>
__global__ void axpy_kernel(T* __restrict__ dst, const T* __restrict__ src, int64_t n, acc_t<T> alpha) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = from_acc<T>(to_acc(dst[i]) + alpha * to_acc(src[i]));
}

void fill(Tensor& dst, double value) {
  check_on_device("fill", dst.device(), {&dst});
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(fill_kernel<T>, grid_for(n, kBlock), kBlock, 0, stream_for(dst.device()),
                  static_cast<T*>(dst.data_ptr()), n, scalar_as<T>(value));
  });
}

void copy(const Tensor& src, Tensor& dst) {
  TANDEM_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "copy: src {} {} vs dst {} {}",
               dtype_name(src.dtype()), shape_str(src.shape()), dtype_name(dst.dtype()), shape_str(dst.shape()));
  copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), src.nbytes());
}

void cast(const Tensor& src, Tensor& dst) {
  check_on_device("cast", src.device(), {&src, &dst});
  TANDEM_CHECK(src.numel() == dst.numel(), "cast: {} elements into {}", src.numel(), dst.numel());
  const int64_t n = src.numel();
  if (n == 0) return;
  dispatch(src.dtype(), [&](auto stag) {
    using S = decltype(stag);
    dispatch(dst.dtype(), [&](auto dtag) {
      using D = decltype(dtag);
      TANDEM_LAUNCH(cast_kernel<S, D>, grid_for(n, kBlock), kBlock, 0, stream_for(src.device()),
                    static_cast<const S*>(src.data_ptr()), static_cast<D*>(dst.data_ptr()), n);
    });
  });
}

void axpy(Tensor& dst, const Tensor& src, double alpha) {
  check_on_device("axpy", dst.device(), {&dst, &src});
  TANDEM_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "axpy: dst {} {} vs src {} {}",
               dtype_name(dst.dtype()), shape_str(dst.shape()), dtype_name(src.dtype()), shape_str(src.shape()));
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(axpy_kernel<T>, grid_for(n, kBlock), kBlock, 0, stream_for(dst.device()),
                  static_cast<T*>(dst.data_ptr()), static_cast<const T*>(src.data_ptr()), n,
                  static_cast<acc_t<T>>(alpha));
  });
}

TANDEM_REGISTER_KERNEL(kernels::fill, kKind, fill);
TANDEM_REGISTER_KERNEL(kernels::copy, kKind, copy);
TANDEM_REGISTER_KERNEL(kernels::cast, kKind, cast);
TANDEM_REGISTER_KERNEL(kernels::axpy, kKind, axpy);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
