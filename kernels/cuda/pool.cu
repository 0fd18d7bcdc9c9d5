// Max and average pooling (NCHW) of the CUDA backend: one thread per output in forward; backward
// gathers, one thread per input pixel, over the windows that cover it in increasing output order,
// so no atomics are needed and the sums are added in the CPU's order (bitwise equal).
#include "kernels/cuda/common.cuh"
#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/pool.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

using kernels::Pool2dGeometry;

__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <class T>
__global__ void max_pool_forward_kernel(const T* __restrict__ x, T* __restrict__ y, int32_t* __restrict__ arg,
                                        Pool2dGeometry g) {
  using A = acc_t<T>;
  const int64_t total = g.n * g.c * g.ho * g.wo;
  for (int64_t q = global_thread(); q < total; q += grid_threads()) {
    const int64_t ox = q % g.wo, oy = q / g.wo % g.ho, p = q / (g.wo * g.ho);
    const T* in = x + p * g.h * g.w;
    const int64_t y0 = max64(oy * g.sh - g.ph, 0), y1 = min64(oy * g.sh - g.ph + g.kh, g.h);
    const int64_t x0 = max64(ox * g.sw - g.pw, 0), x1 = min64(ox * g.sw - g.pw + g.kw, g.w);
    A best = A(-INFINITY);
    int32_t best_i = static_cast<int32_t>(y0 * g.w + x0);
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) {
        const A v = to_acc(in[iy * g.w + ix]);
        if (v > best || v != v) {  // larger, or NaN (which then propagates)
          best = v;
          best_i = static_cast<int32_t>(iy * g.w + ix);
        }
      }
    y[q] = from_acc<T>(best);
    arg[q] = best_i;
  }
}

// Output rows/cols whose windows cover input position i (inclusive range, possibly empty).
__device__ __forceinline__ void covering(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t out, int64_t& lo,
                                         int64_t& hi) {
  // o covers i iff o*s - pad <= i < o*s - pad + k.
  const int64_t num = i + pad - k + 1;
  lo = num <= 0 ? 0 : (num + s - 1) / s;
  hi = min64((i + pad) / s, out - 1);
}

template <class T>
__global__ void max_pool_backward_kernel(const T* __restrict__ dy, const int32_t* __restrict__ arg,
                                         T* __restrict__ dx, Pool2dGeometry g) {
  using A = acc_t<T>;
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t ix = e % g.w, iy = e / g.w % g.h, p = e / (g.w * g.h);
    const int32_t me = static_cast<int32_t>(iy * g.w + ix);
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, g.kh, g.sh, g.ph, g.ho, oy0, oy1);
    covering(ix, g.kw, g.sw, g.pw, g.wo, ox0, ox1);
    A acc = A(0);
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t q = (p * g.ho + oy) * g.wo + ox;
        if (arg[q] == me) acc += to_acc(dy[q]);
      }
    dx[e] = from_acc<T>(acc);
  }
}

template <class T>
__global__ void avg_pool_forward_kernel(const T* __restrict__ x, T* __restrict__ y, Pool2dGeometry g, acc_t<T> inv) {
  using A = acc_t<T>;
  const int64_t total = g.n * g.c * g.ho * g.wo;
  for (int64_t q = global_thread(); q < total; q += grid_threads()) {
    const int64_t ox = q % g.wo, oy = q / g.wo % g.ho, p = q / (g.wo * g.ho);
    const T* in = x + p * g.h * g.w;
    const int64_t y0 = max64(oy * g.sh - g.ph, 0), y1 = min64(oy * g.sh - g.ph + g.kh, g.h);
    const int64_t x0 = max64(ox * g.sw - g.pw, 0), x1 = min64(ox * g.sw - g.pw + g.kw, g.w);
    A s = A(0);
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) s += to_acc(in[iy * g.w + ix]);
    y[q] = from_acc<T>(s * inv);
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, Pool2dGeometry g, acc_t<T> inv) {
  using A = acc_t<T>;
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t ix = e % g.w, iy = e / g.w % g.h, p = e / (g.w * g.h);
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, g.kh, g.sh, g.ph, g.ho, oy0, oy1);
    covering(ix, g.kw, g.sw, g.pw, g.wo, ox0, ox1);
    A acc = A(0);
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) acc += to_acc(dy[(p * g.ho + oy) * g.wo + ox]) * inv;
    dx[e] = from_acc<T>(acc);
  }
}

void max_pool2d_forward(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2dGeometry& g) {
  check_on_device("max_pool2d", x.device(), {&x, &y, &argmax});
  TANDEM_CHECK(argmax.dtype() == DType::i32, "max_pool2d: argmax must be i32, got {}", dtype_name(argmax.dtype()));
  const int64_t total = g.n * g.c * g.ho * g.wo;
  if (total == 0) return;
  dispatch_floating_only(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(max_pool_forward_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(x.device()),
                  static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                  static_cast<int32_t*>(argmax.data_ptr()), g);
  });
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2dGeometry& g) {
  check_on_device("max_pool2d backward", dy.device(), {&dy, &argmax, &dx});
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total == 0) return;
  dispatch_floating_only(dy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(max_pool_backward_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(dy.device()),
                  static_cast<const T*>(dy.data_ptr()), static_cast<const int32_t*>(argmax.data_ptr()),
                  static_cast<T*>(dx.data_ptr()), g);
  });
}

void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dGeometry& g) {
  check_on_device("avg_pool2d", x.device(), {&x, &y});
  const int64_t total = g.n * g.c * g.ho * g.wo;
  if (total == 0) return;
  dispatch_floating_only(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    TANDEM_LAUNCH(avg_pool_forward_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(x.device()),
                  static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), g,
                  A(1) / static_cast<A>(g.kh * g.kw));
  });
}

void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dGeometry& g) {
  check_on_device("avg_pool2d backward", dy.device(), {&dy, &dx});
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total == 0) return;
  dispatch_floating_only(dy.dtype(), "avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    TANDEM_LAUNCH(avg_pool_backward_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(dy.device()),
                  static_cast<const T*>(dy.data_ptr()), static_cast<T*>(dx.data_ptr()), g,
                  A(1) / static_cast<A>(g.kh * g.kw));
  });
}

TANDEM_REGISTER_KERNEL(kernels::max_pool2d_forward, kKind, max_pool2d_forward);
TANDEM_REGISTER_KERNEL(kernels::max_pool2d_backward, kKind, max_pool2d_backward);
TANDEM_REGISTER_KERNEL(kernels::avg_pool2d_forward, kKind, avg_pool2d_forward);
TANDEM_REGISTER_KERNEL(kernels::avg_pool2d_backward, kKind, avg_pool2d_backward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
