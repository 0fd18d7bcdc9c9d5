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

// One element converted as the CPU backend converts it (convert_host: 16-bit floats through float).
template <class S, class D>
__device__ __forceinline__ D cast_one(S x) {
  if constexpr (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>) return D(static_cast<float>(x));
  else if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>) return static_cast<D>(static_cast<float>(x));
  else return static_cast<D>(x);
}

// Vec: V elements a thread access, packs of the wider type 16 bytes (both pointers aligned to their
// pack): the f32 <-> bf16 casts of a bf16 step (the [tokens, vocab] logits among them) move twice
// to four times the bytes of a load instruction of one element.
template <class S, class D>
constexpr int kCastWidth = kPackWidth<S> < kPackWidth<D> ? kPackWidth<S> : kPackWidth<D>;

template <class S, class D, bool Vec>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  constexpr int V = kCastWidth<S, D>;
  int64_t start = 0;
  if constexpr (Vec) {
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      const Pack<S, V> in = reinterpret_cast<const Pack<S, V>*>(src)[i];
      Pack<D, V> out;
      for (int k = 0; k < V; ++k) out.v[k] = cast_one<S, D>(in.v[k]);
      reinterpret_cast<Pack<D, V>*>(dst)[i] = out;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads()) dst[i] = cast_one<S, D>(src[i]);
}

// dst += alpha * src (autograd's gradient accumulation). Vec: 16-byte packs of both (both aligned).
template <class T, bool Vec>
__global__ void axpy_kernel(T* __restrict__ dst, const T* __restrict__ src, int64_t n, acc_t<T> alpha) {
  constexpr int V = kPackWidth<T>;
  int64_t start = 0;
  if constexpr (Vec) {
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      Pack<T, V> d = reinterpret_cast<const Pack<T, V>*>(dst)[i];
      const Pack<T, V> s = reinterpret_cast<const Pack<T, V>*>(src)[i];
      for (int k = 0; k < V; ++k) d.v[k] = from_acc<T>(to_acc(d.v[k]) + alpha * to_acc(s.v[k]));
      reinterpret_cast<Pack<T, V>*>(dst)[i] = d;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads())
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
      constexpr int V = kCastWidth<S, D>;
      const bool vec = V > 1 && aligned_to(src.data_ptr(), V * sizeof(S)) && aligned_to(dst.data_ptr(), V * sizeof(D));
      TANDEM_LAUNCH(vec ? cast_kernel<S, D, true> : cast_kernel<S, D, false>, grid_for(n, kBlock * (vec ? V : 1)),
                    kBlock, 0, stream_for(src.device()), static_cast<const S*>(src.data_ptr()),
                    static_cast<D*>(dst.data_ptr()), n);
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
    const bool vec = kPackWidth<T> > 1 && aligned16(dst.data_ptr()) && aligned16(src.data_ptr());
    TANDEM_LAUNCH(vec ? axpy_kernel<T, true> : axpy_kernel<T, false>, grid_for(n, kBlock * (vec ? kPackWidth<T> : 1)),
                  kBlock, 0, stream_for(dst.device()), static_cast<T*>(dst.data_ptr()),
                  static_cast<const T*>(src.data_ptr()), n, static_cast<acc_t<T>>(alpha));
  });
}

TANDEM_REGISTER_KERNEL(kernels::fill, kKind, fill);
TANDEM_REGISTER_KERNEL(kernels::copy, kKind, copy);
TANDEM_REGISTER_KERNEL(kernels::cast, kKind, cast);
TANDEM_REGISTER_KERNEL(kernels::axpy, kKind, axpy);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
