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

template <class S, class D, bool Vec>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  cast_elements(src, dst, n, Vec, global_thread(), grid_threads());
}

// dst = a + alpha * src, a == dst for axpy (autograd's gradient accumulation: a 16-bit gradient of an
// autocast region added to its f32 parameter's gradient in one pass; the residual stream plus an
// autocast branch). Vec: V elements a thread access, the wider type's packs 16 bytes (every pointer
// aligned to its pack). dst and a may alias: each element is read before it is written.
template <class D, class S, bool Vec>
__global__ void axpy_kernel(D* dst, const D* a, const S* __restrict__ src, int64_t n, acc_t<D> alpha) {
  constexpr int V = kCastWidth<S, D>;
  int64_t start = 0;
  if constexpr (Vec) {
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      Pack<D, V> d = reinterpret_cast<const Pack<D, V>*>(a)[i];
      const Pack<S, V> s = reinterpret_cast<const Pack<S, V>*>(src)[i];
      for (int k = 0; k < V; ++k) d.v[k] = from_acc<D>(to_acc(d.v[k]) + alpha * cast_one<S, acc_t<D>>(s.v[k]));
      reinterpret_cast<Pack<D, V>*>(dst)[i] = d;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads())
    dst[i] = from_acc<D>(to_acc(a[i]) + alpha * cast_one<S, acc_t<D>>(src[i]));
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
      constexpr int V = kCastWidth<S, D>;
      const bool vec = V > 1 && aligned_to(src.data_ptr(), V * sizeof(S)) && aligned_to(dst.data_ptr(), V * sizeof(D));
      TANDEM_LAUNCH(vec ? cast_kernel<S, D, true> : cast_kernel<S, D, false>, grid_for(n, kBlock * (vec ? V : 1)),
                    kBlock, 0, stream_for(src.device()), static_cast<const S*>(src.data_ptr()),
                    static_cast<D*>(dst.data_ptr()), n);
    });
  });
}

void axpy_into(const Tensor& a, const Tensor& src, double alpha, Tensor& dst) {
  check_on_device("axpy", dst.device(), {&a, &dst, &src});
  const int64_t n = dst.numel();
  kernels::dispatch_axpy(dst, src, [&](auto dtag, auto stag) {
    using D = decltype(dtag);
    using S = decltype(stag);
    if (n == 0) return;
    constexpr int V = kCastWidth<S, D>;
    const bool vec = V > 1 && aligned_to(dst.data_ptr(), V * sizeof(D)) && aligned_to(a.data_ptr(), V * sizeof(D)) &&
                     aligned_to(src.data_ptr(), V * sizeof(S));
    TANDEM_LAUNCH(vec ? axpy_kernel<D, S, true> : axpy_kernel<D, S, false>, grid_for(n, kBlock * (vec ? V : 1)),
                  kBlock, 0, stream_for(dst.device()), static_cast<D*>(dst.data_ptr()),
                  static_cast<const D*>(a.data_ptr()), static_cast<const S*>(src.data_ptr()), n,
                  static_cast<acc_t<D>>(alpha));
  });
}

void axpy(Tensor& dst, const Tensor& src, double alpha) { axpy_into(dst, src, alpha, dst); }

void axpy_out(const Tensor& a, const Tensor& src, double alpha, Tensor& out) {
  kernels::check_axpy_out(a, out);
  axpy_into(a, src, alpha, out);
}

TANDEM_REGISTER_KERNEL(kernels::fill, kKind, fill);
TANDEM_REGISTER_KERNEL(kernels::copy, kKind, copy);
TANDEM_REGISTER_KERNEL(kernels::cast, kKind, cast);
TANDEM_REGISTER_KERNEL(kernels::axpy, kKind, axpy);
TANDEM_REGISTER_KERNEL(kernels::axpy_out, kKind, axpy_out);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
