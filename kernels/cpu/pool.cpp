// CPU max/avg pooling over NCHW planes: one (image, channel) plane per OpenMP iteration, each
// plane's work in a fixed order (results independent of the thread count).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/max_pool_plane.h"
#include "runtime/backend/pool.h"

namespace tandem::kernels {
namespace {

template <class T>
void max_forward_t(const T* x, T* y, int32_t* arg, const Pool2dGeometry& g) {
  const int64_t planes = g.n * g.c, hw = g.h * g.w, ohw = g.ho * g.wo;
#pragma omp parallel for schedule(static) if (planes * hw >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) cpu_pool::max_pool_plane(x + p * hw, y + p * ohw, arg + p * ohw, g);
}

template <class T>
void max_backward_t(const T* dy, const int32_t* arg, T* dx, const Pool2dGeometry& g) {
  const int64_t planes = g.n * g.c, hw = g.h * g.w, ohw = g.ho * g.wo;
#pragma omp parallel for schedule(static) if (planes * hw >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) cpu_pool::max_unpool_plane(dy + p * ohw, arg + p * ohw, dx + p * hw, g);
}

template <class T>
void avg_forward_t(const T* x, T* y, const Pool2dGeometry& g) {
  using A = acc_t<T>;
  const int64_t planes = g.n * g.c, hw = g.h * g.w, ohw = g.ho * g.wo;
  const A inv = A(1) / static_cast<A>(g.kh * g.kw);
#pragma omp parallel for schedule(static) if (planes * hw >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = x + p * hw;
    T* out = y + p * ohw;
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * g.sh - g.ph, 0), y1 = std::min(oy * g.sh - g.ph + g.kh, g.h);
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * g.sw - g.pw, 0), x1 = std::min(ox * g.sw - g.pw + g.kw, g.w);
        A s = A(0);
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) s += static_cast<A>(in[iy * g.w + ix]);
        out[oy * g.wo + ox] = T(s * inv);
      }
    }
  }
}

template <class T>
void avg_backward_t(const T* dy, T* dx, const Pool2dGeometry& g) {
  using A = acc_t<T>;
  const int64_t planes = g.n * g.c, hw = g.h * g.w, ohw = g.ho * g.wo;
  const A inv = A(1) / static_cast<A>(g.kh * g.kw);
#pragma omp parallel for schedule(static) if (planes * hw >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) {
    std::vector<A> acc(static_cast<size_t>(hw), A(0));
    const T* s = dy + p * ohw;
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * g.sh - g.ph, 0), y1 = std::min(oy * g.sh - g.ph + g.kh, g.h);
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * g.sw - g.pw, 0), x1 = std::min(ox * g.sw - g.pw + g.kw, g.w);
        const A v = static_cast<A>(s[oy * g.wo + ox]) * inv;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) acc[static_cast<size_t>(iy * g.w + ix)] += v;
      }
    }
    T* d = dx + p * hw;
    for (int64_t i = 0; i < hw; ++i) d[i] = T(acc[static_cast<size_t>(i)]);
  }
}

void cpu_max_pool2d_forward(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_forward_t<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), argmax.data<int32_t>(), g);
  });
}

void cpu_max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2dGeometry& g) {
  dispatch_floating(dy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    max_backward_t<T>(static_cast<const T*>(dy.data_ptr()), argmax.data<int32_t>(), static_cast<T*>(dx.data_ptr()), g);
  });
}

void cpu_avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    avg_forward_t<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), g);
  });
}

void cpu_avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dGeometry& g) {
  dispatch_floating(dy.dtype(), "avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    avg_backward_t<T>(static_cast<const T*>(dy.data_ptr()), static_cast<T*>(dx.data_ptr()), g);
  });
}

TANDEM_REGISTER_KERNEL(max_pool2d_forward, DeviceKind::CPU, cpu_max_pool2d_forward);
TANDEM_REGISTER_KERNEL(max_pool2d_backward, DeviceKind::CPU, cpu_max_pool2d_backward);
TANDEM_REGISTER_KERNEL(avg_pool2d_forward, DeviceKind::CPU, cpu_avg_pool2d_forward);
TANDEM_REGISTER_KERNEL(avg_pool2d_backward, DeviceKind::CPU, cpu_avg_pool2d_backward);

}  // namespace
}  // namespace tandem::kernels
