// CPU batch norm: the four stages of runtime/backend/norm.h and the fused forward and backward
// (normalise, relu and max pool in one pass). Statistics are accumulated in the statistics dtype (f64
// for f64, f32 otherwise) in a fixed order, one channel per OpenMP iteration, so results do not depend
// on the thread count. The fused kernels also compute 16-bit tensors as the f32 kernels compute them
// cast to f32 (`widened`, autocast's batch norm of a 16-bit convolution's output): each channel of x
// and each plane of dy is widened into a cache-resident scratch as it is visited, and y and dx are
// rounded to the 16-bit dtype plane by plane, instead of whole-tensor casts before and after.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/max_pool_plane.h"
#include "kernels/cpu/norm_params.h"
#include "runtime/backend/common/welford.h"
#include "runtime/backend/core.h"
#include "runtime/backend/norm.h"

namespace tandem::kernels {
namespace {

using cpu_norm::store;
using cpu_norm::vec;

// Channel geometry of x [N, C, inner...].
struct Nci {
  int64_t n, c, inner;
};
Nci nci_of(const Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1);
  return {n, c, n * c == 0 ? 0 : x.numel() / (n * c)};
}

// Statistics of one channel whose plane n is at first + n * stride: two passes over each [inner]
// plane, then Chan's merge into the channel's running statistics (shared by the staged and the fused
// forward, so both give identical numbers). A channel's planes lie C * H * W apart, each only a few
// cache lines long (the cnn's second block: 13), too short for the hardware prefetcher to run ahead:
// so the loops over a channel's planes ask for the next plane's lines (prefetch_lines) while they
// work on this one.
template <class T, class S>
Welford<S> channel_stats(const T* first, int64_t stride, const Nci& g) {
  Welford<S> acc;
  for (int64_t n = 0; n < g.n; ++n) {
    const T* p = first + n * stride;
    if (n + 1 < g.n) prefetch_lines(p + stride, g.inner);
    const S sum = sum_of<S>(p, g.inner);
    Welford<S> part;
    part.count = g.inner;
    part.mean = g.inner ? sum / static_cast<S>(g.inner) : S(0);
    part.m2 = sum_sq_dev<S>(p, g.inner, part.mean);
    welford_merge(acc, part);
  }
  return acc;
}

// Stage (2) of one value, and relu of it, shared by the fused forward and the fused backward's
// recomputation so that both see the same bits (the backward's mask must be the forward's).
template <class T, class S>
inline T bn_affine(T x, S scale, S shift) {
  return T(static_cast<S>(x) * scale + shift);
}
template <class T, class S>
inline T relu_of(T v) {
  return static_cast<S>(v) < S(0) ? T(0) : v;  // NaN stays NaN, as ops::relu
}

// Channel c of x [N, C, inner] as T: plane n at first + n * stride. X is T: x's own planes. X is
// narrower (f16/bf16 for f32 T): the planes widened into a per-thread scratch [N, inner].
template <class T>
struct ChannelView {
  const T* first;
  int64_t stride;
};
template <class T>
ChannelView<T> channel_of(const Tensor& x, const Nci& g, int64_t c) {
  if (x.dtype() == dtype_v<T>) return {static_cast<const T*>(x.data_ptr()) + c * g.inner, g.c * g.inner};
  T* w = thread_scratch<T>(Scratch::NormWiden, g.n * g.inner);
  const size_t es = dtype_size(x.dtype());
  const char* px = static_cast<const char*>(x.data_ptr());
  for (int64_t n = 0; n < g.n; ++n) {
    const char* plane = px + static_cast<size_t>((n * g.c + c) * g.inner) * es;
    if (n + 1 < g.n) prefetch_lines(plane + static_cast<size_t>(g.c * g.inner) * es, g.inner * int64_t(es));
    convert_host(plane, x.dtype(), w + n * g.inner, dtype_v<T>, g.inner);
  }
  return {w, g.inner};
}

void cpu_bn_stats(const Tensor& x, Tensor& mean, Tensor& m2) {
  dispatch_norm_types(x.dtype(), "batch_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    const T* px = static_cast<const T*>(x.data_ptr());
    std::vector<S> mv(static_cast<size_t>(g.c)), m2v(static_cast<size_t>(g.c));
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t c = 0; c < g.c; ++c) {
      const Welford<S> acc = channel_stats<T, S>(px + c * g.inner, g.c * g.inner, g);
      mv[static_cast<size_t>(c)] = acc.mean;
      m2v[static_cast<size_t>(c)] = acc.m2;
    }
    store(mv, mean);
    store(m2v, m2);
  });
}

void cpu_bn_finalize(const Tensor& mean, const Tensor& m2, int64_t count, double eps, double momentum,
                     Tensor& invstd, Tensor& running_mean, Tensor& running_var) {
  const int64_t c = mean.numel();
  std::vector<double> mv = vec<double>(mean, c, 0), m2v = vec<double>(m2, c, 0);
  // invstd in the statistics dtype: compute in S so f32 matches a native f32 computation.
  dispatch_norm_types(invstd.dtype() == DType::f64 ? DType::f64 : DType::f32, "batch_norm", [&](auto, auto s) {
    using S = decltype(s);
    std::vector<S> m2s = vec<S>(m2, c, 0), out(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i)
      out[size_t(i)] = S(1) / std::sqrt(m2s[size_t(i)] / static_cast<S>(count) + static_cast<S>(eps));
    store(out, invstd);
  });
  if (running_mean.defined()) {
    std::vector<double> rm = vec<double>(running_mean, c, 0);
    for (int64_t i = 0; i < c; ++i) rm[size_t(i)] = (1 - momentum) * rm[size_t(i)] + momentum * mv[size_t(i)];
    store(rm, running_mean);
  }
  if (running_var.defined()) {
    std::vector<double> rv = vec<double>(running_var, c, 0);
    const double denom = count > 1 ? double(count - 1) : 1.0;
    for (int64_t i = 0; i < c; ++i)
      rv[size_t(i)] = (1 - momentum) * rv[size_t(i)] + momentum * m2v[size_t(i)] / denom;
    store(rv, running_var);
  }
}

void cpu_bn_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
  dispatch_norm_types(x.dtype(), "batch_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    std::vector<S> mv = vec<S>(mean, g.c, 0), iv = vec<S>(invstd, g.c, 1), w = vec<S>(weight, g.c, 1),
                   b = vec<S>(bias, g.c, 0);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* py = static_cast<T*>(y.data_ptr());
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t p = 0; p < g.n * g.c; ++p) {
      const size_t c = static_cast<size_t>(p % g.c);
      const S scale = iv[c] * w[c], shift = b[c] - mv[c] * scale;
      const T* in = px + p * g.inner;
      T* out = py + p * g.inner;
      for (int64_t i = 0; i < g.inner; ++i) out[i] = bn_affine(in[i], scale, shift);
    }
  });
}

void cpu_bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                            Tensor& sum_dy, Tensor& sum_dy_xmu, Tensor& grad_weight, Tensor& grad_bias) {
  dispatch_norm_types(x.dtype(), "batch_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    std::vector<S> mv = vec<S>(mean, g.c, 0), iv = vec<S>(invstd, g.c, 1);
    std::vector<S> sd(static_cast<size_t>(g.c)), sdx(static_cast<size_t>(g.c));
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dy.data_ptr());
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t c = 0; c < g.c; ++c) {
      const S m = mv[size_t(c)];
      S a = 0, b = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const T* xi = px + (n * g.c + c) * g.inner;
        const T* di = pd + (n * g.c + c) * g.inner;
        S pa, pb;  // per-plane partial sums keep the rounding error small
        sum_dy_dyxmu<S>(di, xi, g.inner, m, pa, pb);
        a += pa;
        b += pb;
      }
      sd[size_t(c)] = a;
      sdx[size_t(c)] = b;
    }
    store(sd, sum_dy);
    store(sdx, sum_dy_xmu);
    if (grad_weight.defined()) {
      std::vector<S> gw(static_cast<size_t>(g.c));
      for (int64_t c = 0; c < g.c; ++c) gw[size_t(c)] = sdx[size_t(c)] * iv[size_t(c)];
      store(gw, grad_weight);
    }
    store(sd, grad_bias);
  });
}

void cpu_bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                           Tensor& dx) {
  dispatch_norm_types(x.dtype(), "batch_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    const bool batch_stats = sum_dy.defined();
    std::vector<S> mv = vec<S>(mean, g.c, 0), iv = vec<S>(invstd, g.c, 1), w = vec<S>(weight, g.c, 1),
                   sd = vec<S>(sum_dy, g.c, 0), sdx = vec<S>(sum_dy_xmu, g.c, 0);
    const S inv_count = count > 0 ? S(1) / static_cast<S>(count) : S(0);
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dy.data_ptr());
    T* pdx = static_cast<T*>(dx.data_ptr());
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t p = 0; p < g.n * g.c; ++p) {
      const size_t c = static_cast<size_t>(p % g.c);
      const S scale = iv[c] * w[c];
      const T* xi = px + p * g.inner;
      const T* di = pd + p * g.inner;
      T* o = pdx + p * g.inner;
      if (!batch_stats) {
        for (int64_t i = 0; i < g.inner; ++i) o[i] = T(static_cast<S>(di[i]) * scale);
        continue;
      }
      const S mean_dy = sd[c] * inv_count, k = iv[c] * iv[c] * sdx[c] * inv_count, m = mv[c];
      for (int64_t i = 0; i < g.inner; ++i)
        o[i] = T((static_cast<S>(di[i]) - mean_dy - (static_cast<S>(xi[i]) - m) * k) * scale);
    }
  });
}

// The dtype the fused kernels compute in: f32 for `widened` f16/bf16 tensors (x read through
// channel_of, the same values as a cast), else the tensors' own.
DType fused_compute_dtype(const char* what, const Tensor& x, const Tensor& y, const BatchNormEpilogue& epi) {
  TANDEM_CHECK(x.dtype() == y.dtype(), "{}: x {} with {} y/dy: give both one dtype", what, dtype_name(x.dtype()),
               dtype_name(y.dtype()));
  if (!epi.widened) return x.dtype();
  TANDEM_CHECK(is_low_precision(x.dtype()), "{}: widened needs f16 or bf16 tensors, got {}", what,
               dtype_name(x.dtype()));
  return DType::f32;
}

void cpu_bn_forward_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const BatchNormEpilogue& epi, Tensor& y, Tensor& argmax, Tensor& mean, Tensor& m2,
                          Tensor& invstd) {
  dispatch_norm_types(fused_compute_dtype("batch_norm", x, y, epi), "batch_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    std::vector<S> w = vec<S>(weight, g.c, 1), b = vec<S>(bias, g.c, 0);
    std::vector<S> mv(static_cast<size_t>(g.c)), m2v(static_cast<size_t>(g.c)), iv(static_cast<size_t>(g.c));
    // A 16-bit y (widened): each output plane computed in T into a scratch, then rounded into place.
    const bool narrow_y = y.dtype() != dtype_v<T>;
    T* py = narrow_y ? nullptr : static_cast<T*>(y.data_ptr());
    char* py16 = narrow_y ? static_cast<char*>(y.data_ptr()) : nullptr;
    const size_t ys = dtype_size(y.dtype());
    int32_t* parg = epi.max_pool ? argmax.data<int32_t>() : nullptr;
    const int64_t out_inner = epi.max_pool ? epi.pool.ho * epi.pool.wo : g.inner;
    const S count = static_cast<S>(g.n * g.inner);
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t c = 0; c < g.c; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const ChannelView<T> xc = channel_of<T>(x, g, c);
      const Welford<S> st = channel_stats<T, S>(xc.first, xc.stride, g);
      const S inv = S(1) / std::sqrt(st.m2 / count + static_cast<S>(eps));  // as cpu_bn_finalize
      mv[ci] = st.mean;
      m2v[ci] = st.m2;
      iv[ci] = inv;
      const S scale = inv * w[ci], shift = b[ci] - st.mean * scale;
      // With a pool or a 16-bit y, each normalised plane goes to a cache-resident scratch plane and is
      // pooled and/or rounded from there.
      T* plane = epi.max_pool || narrow_y ? thread_scratch<T>(Scratch::NormPlane, g.inner) : nullptr;
      T* pooled_plane = epi.max_pool && narrow_y ? thread_scratch<T>(Scratch::NormGradPlane, out_inner) : nullptr;
      for (int64_t n = 0; n < g.n; ++n) {
        const T* in = xc.first + n * xc.stride;
        const int64_t at = (n * g.c + c) * out_inner;  // the output plane's first element
        T* out = plane ? plane : py + at;
        if (epi.relu) {
          for (int64_t i = 0; i < g.inner; ++i) out[i] = relu_of<T, S>(bn_affine(in[i], scale, shift));
        } else {
          for (int64_t i = 0; i < g.inner; ++i) out[i] = bn_affine(in[i], scale, shift);
        }
        if (epi.max_pool) {
          T* pooled = narrow_y ? pooled_plane : py + at;
          int32_t* arg = parg + at;
          cpu_pool::max_pool_plane(plane, pooled, arg, epi.pool);
          // The pooled value is relu's output at arg, so it alone decides relu's gradient there: an
          // output that is not positive drops its gradient (arg ~i), and the backward needs no mask pass.
          if (epi.relu)
            for (int64_t q = 0; q < out_inner; ++q) arg[q] = static_cast<S>(pooled[q]) > S(0) ? arg[q] : ~arg[q];
          if (narrow_y) convert_host(pooled, dtype_v<T>, py16 + static_cast<size_t>(at) * ys, y.dtype(), out_inner);
        } else if (narrow_y) {
          convert_host(plane, dtype_v<T>, py16 + static_cast<size_t>(at) * ys, y.dtype(), g.inner);
        }
      }
    }
    store(mv, mean);
    store(m2v, m2);
    store(iv, invstd);
  });
}

void cpu_bn_backward_fused(const Tensor& dy, const Tensor& argmax, const Tensor& x, const Tensor& mean,
                           const Tensor& invstd, const Tensor& weight, const Tensor& bias, const BatchNormEpilogue& epi,
                           Tensor& dx, Tensor& grad_weight, Tensor& grad_bias) {
  const DType compute = fused_compute_dtype("batch_norm backward", x, dy, epi);
  if (dx.defined()) fused_compute_dtype("batch_norm backward (dx)", x, dx, epi);
  dispatch_norm_types(compute, "batch_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    std::vector<S> mv = vec<S>(mean, g.c, 0), iv = vec<S>(invstd, g.c, 1), w = vec<S>(weight, g.c, 1),
                   bv = vec<S>(bias, g.c, 0);
    std::vector<S> sd(static_cast<size_t>(g.c)), sdx(static_cast<size_t>(g.c));
    // 16-bit dy and dx (widened): each dy plane widened to T as it is staged below, each dx plane
    // computed in T into a scratch, then rounded into place.
    const bool narrow = dy.dtype() != dtype_v<T>;
    const T* pd = narrow ? nullptr : static_cast<const T*>(dy.data_ptr());
    const char* pd16 = narrow ? static_cast<const char*>(dy.data_ptr()) : nullptr;
    const size_t es = dtype_size(dy.dtype());
    const int32_t* parg = epi.max_pool ? argmax.data<int32_t>() : nullptr;
    const int64_t dy_inner = epi.max_pool ? epi.pool.ho * epi.pool.wo : g.inner;
    const bool narrow_dx = dx.defined() && narrow;
    T* pdx = dx.defined() && !narrow_dx ? static_cast<T*>(dx.data_ptr()) : nullptr;
    char* pdx16 = narrow_dx ? static_cast<char*>(dx.data_ptr()) : nullptr;
    const S inv_count = S(1) / static_cast<S>(std::max<int64_t>(g.n * g.inner, 1));
    const bool epilogue = epi.relu || epi.max_pool;
    const bool staged = epilogue || narrow;  // batch norm's dy made into a per-channel scratch first
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t c = 0; c < g.c; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const S m = mv[ci], scale = iv[ci] * w[ci];
      const ChannelView<T> xc = channel_of<T>(x, g, c);
      // The epilogue's backward (unpool, relu mask) and a 16-bit dy's widening make the channel's dy of
      // batch norm once, into a per-thread scratch of N * H * W values that both passes below read
      // (cache-resident, like x).
      T* local = nullptr;
      if (staged) {
        local = thread_scratch<T>(Scratch::NormChannel, g.n * g.inner);
        // A 16-bit dy plane is widened here before the epilogue's backward reads it (without an
        // epilogue, straight into local).
        T* widened_dy = narrow && epilogue ? thread_scratch<T>(Scratch::NormGradPlane, dy_inner) : nullptr;
        const S shift = bv[ci] - m * scale;  // the forward's stage (2)
        for (int64_t n = 0; n < g.n; ++n) {
          const T* xi = xc.first + n * xc.stride;
          const int64_t at = (n * g.c + c) * dy_inner;  // dy's plane's first element
          T* o = local + n * g.inner;
          if (n + 1 < g.n) {
            if (narrow)
              prefetch_lines(pd16 + static_cast<size_t>(at + g.c * dy_inner) * es, dy_inner * int64_t(es));
            else
              prefetch_lines(pd + at + g.c * dy_inner, dy_inner);
            if (epi.max_pool) prefetch_lines(parg + ((n + 1) * g.c + c) * dy_inner, dy_inner);
            if (epi.relu && !epi.max_pool) prefetch_lines(xi + xc.stride, g.inner);
          }
          const T* di = narrow ? widened_dy : pd + at;
          if (narrow) {
            convert_host(pd16 + static_cast<size_t>(at) * es, dy.dtype(), epilogue ? widened_dy : o, dtype_v<T>,
                         dy_inner);
            if (!epilogue) continue;
          }
          if (epi.max_pool) {  // relu's mask is already in the argmax (see the forward)
            cpu_pool::max_unpool_plane(di, parg + (n * g.c + c) * dy_inner, o, epi.pool);
            continue;
          }
          if (epi.relu) {
            for (int64_t i = 0; i < g.inner; ++i)
              o[i] = static_cast<S>(bn_affine(xi[i], scale, shift)) > S(0) ? di[i] : T(0);
          }
        }
      }
      auto dy_plane = [&](int64_t n) { return staged ? local + n * g.inner : pd + (n * g.c + c) * g.inner; };
      S a = 0, bsum = 0;
      for (int64_t n = 0; n < g.n; ++n) {  // as cpu_bn_backward_reduce
        const T* xi = xc.first + n * xc.stride;
        if (n + 1 < g.n) prefetch_lines(xi + xc.stride, g.inner);
        S pa, pb;
        sum_dy_dyxmu<S>(dy_plane(n), xi, g.inner, m, pa, pb);
        a += pa;
        bsum += pb;
      }
      sd[ci] = a;
      sdx[ci] = bsum;
      if (!pdx && !pdx16) continue;
      const S mean_dy = a * inv_count, k = iv[ci] * iv[ci] * bsum * inv_count;
      T* o16 = narrow_dx ? thread_scratch<T>(Scratch::NormGradPlane, g.inner) : nullptr;
      for (int64_t n = 0; n < g.n; ++n) {  // as cpu_bn_backward_elemt
        const T* xi = xc.first + n * xc.stride;
        const T* di = dy_plane(n);
        T* o = narrow_dx ? o16 : pdx + (n * g.c + c) * g.inner;
        if (n + 1 < g.n && !narrow_dx) prefetch_lines(o + g.c * g.inner, g.inner, /*for_write=*/true);
        for (int64_t i = 0; i < g.inner; ++i)
          o[i] = T((static_cast<S>(di[i]) - mean_dy - (static_cast<S>(xi[i]) - m) * k) * scale);
        if (narrow_dx)
          convert_host(o, dtype_v<T>, pdx16 + static_cast<size_t>((n * g.c + c) * g.inner) * dtype_size(dx.dtype()),
                       dx.dtype(), g.inner);
      }
    }
    if (grad_weight.defined()) {
      std::vector<S> gw(static_cast<size_t>(g.c));
      for (int64_t c = 0; c < g.c; ++c) gw[size_t(c)] = sdx[size_t(c)] * iv[size_t(c)];
      store(gw, grad_weight);
    }
    store(sd, grad_bias);
  });
}

TANDEM_REGISTER_KERNEL(batch_norm_forward_fused, DeviceKind::CPU, cpu_bn_forward_fused);
TANDEM_REGISTER_KERNEL(batch_norm_backward_fused, DeviceKind::CPU, cpu_bn_backward_fused);
TANDEM_REGISTER_KERNEL(batch_norm_stats, DeviceKind::CPU, cpu_bn_stats);
TANDEM_REGISTER_KERNEL(batch_norm_finalize, DeviceKind::CPU, cpu_bn_finalize);
TANDEM_REGISTER_KERNEL(batch_norm_apply, DeviceKind::CPU, cpu_bn_apply);
TANDEM_REGISTER_KERNEL(batch_norm_backward_reduce, DeviceKind::CPU, cpu_bn_backward_reduce);
TANDEM_REGISTER_KERNEL(batch_norm_backward_elemt, DeviceKind::CPU, cpu_bn_backward_elemt);

}  // namespace
}  // namespace tandem::kernels
