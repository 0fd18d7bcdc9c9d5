// Batch norm for the CUDA backend: the staged kernels of runtime/backend/norm.h (Welford statistics,
// finalize, apply, backward reduce and elementwise). Statistics in S (f64 for f64 input, f32
// otherwise); small parameter tensors of another dtype are cast to S first. Elementwise formulas are
// the CPU's, in the same order; reductions differ only in summation order.
#include <cmath>
#include <utility>

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/core.h"
#include "runtime/backend/norm.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

struct Nci {
  int64_t n, c, inner;
};
Nci nci_of(const Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1);
  return {n, c, n * c == 0 ? 0 : x.numel() / (n * c)};
}

// Statistics of split blockIdx.x of every channel (grid y strides over channels): a partial mean
// and M2 per (channel, split), or, with one split, the channel's mean and M2 themselves.
template <class T, class S>
__global__ void bn_stats_kernel(const T* __restrict__ x, Nci g, int64_t splits, S* __restrict__ mean,
                                S* __restrict__ m2) {
  const SplitRange r = split_range(g.n * g.inner, blockIdx.x, splits);
  for (int64_t c = blockIdx.y; c < g.c; c += gridDim.y) {
    Welford<S> w;
    RowCursor at(r.begin + threadIdx.x, g.inner, blockDim.x);
    for (int64_t k = r.begin + threadIdx.x; k < r.end; k += blockDim.x, at.advance())
      welford_add(w, static_cast<S>(to_acc(x[(at.row * g.c + c) * g.inner + at.col])));
    w = block_welford(w);
    if (threadIdx.x == 0) {
      const int64_t slot = c * splits + blockIdx.x;
      mean[slot] = w.mean;
      m2[slot] = w.m2;
    }
  }
}

// Merges each channel's partial statistics in split order; a split's count is its range's length.
template <class S>
__global__ void bn_stats_merge_kernel(const S* __restrict__ pmean, const S* __restrict__ pm2, Nci g,
                                      int64_t splits, S* __restrict__ mean, S* __restrict__ m2) {
  for (int64_t c = global_thread(); c < g.c; c += grid_threads()) {
    Welford<S> w;
    for (int64_t s = 0; s < splits; ++s) {
      const SplitRange r = split_range(g.n * g.inner, s, splits);
      Welford<S> p;
      p.mean = pmean[c * splits + s];
      p.m2 = pm2[c * splits + s];
      p.count = r.end - r.begin;
      welford_merge(w, p);
    }
    mean[c] = w.mean;
    m2[c] = w.m2;
  }
}

template <class S, class R>
__global__ void bn_finalize_kernel(const S* __restrict__ mean, const S* __restrict__ m2, int64_t C, S count, S eps,
                                   double momentum, double denom, S* __restrict__ invstd, R* __restrict__ running_mean,
                                   R* __restrict__ running_var) {
  for (int64_t c = global_thread(); c < C; c += grid_threads()) {
    invstd[c] = S(1) / std::sqrt(m2[c] / count + eps);
    if (running_mean)
      running_mean[c] = from_acc<R>((1 - momentum) * static_cast<double>(to_acc(running_mean[c])) +
                                    momentum * static_cast<double>(mean[c]));
    if (running_var)
      running_var[c] = from_acc<R>((1 - momentum) * static_cast<double>(to_acc(running_var[c])) +
                                   momentum * static_cast<double>(m2[c]) / denom);
  }
}

template <class T, class S>
__global__ void bn_apply_kernel(const T* __restrict__ x, T* __restrict__ y, Nci g, const S* __restrict__ mean,
                                const S* __restrict__ invstd, const S* __restrict__ weight, const S* __restrict__ bias) {
  const int64_t total = g.n * g.c * g.inner;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t c = e / g.inner % g.c;
    const S scale = invstd[c] * (weight ? weight[c] : S(1));
    const S shift = (bias ? bias[c] : S(0)) - mean[c] * scale;
    y[e] = from_acc<T>(static_cast<S>(to_acc(x[e])) * scale + shift);
  }
}

// sum(dy) and sum(dy * (x - mean)) over split blockIdx.x of every channel: per (channel, split), or,
// with one split, the channel's sums themselves.
template <class T, class S>
__global__ void bn_backward_reduce_kernel(const T* __restrict__ dy, const T* __restrict__ x, Nci g,
                                          int64_t splits, const S* __restrict__ mean, S* __restrict__ sum_dy,
                                          S* __restrict__ sum_dy_xmu) {
  const SplitRange r = split_range(g.n * g.inner, blockIdx.x, splits);
  for (int64_t c = blockIdx.y; c < g.c; c += gridDim.y) {
    const S m = mean[c];
    S a = S(0), b = S(0);
    RowCursor at(r.begin + threadIdx.x, g.inner, blockDim.x);
    for (int64_t k = r.begin + threadIdx.x; k < r.end; k += blockDim.x, at.advance()) {
      const int64_t e = (at.row * g.c + c) * g.inner + at.col;
      const S d = static_cast<S>(to_acc(dy[e]));
      a += d;
      b += d * (static_cast<S>(to_acc(x[e])) - m);
    }
    a = block_sum(a);
    b = block_sum(b);
    if (threadIdx.x == 0) {
      sum_dy[c * splits + blockIdx.x] = a;
      sum_dy_xmu[c * splits + blockIdx.x] = b;
    }
  }
}

template <class S>
__global__ void mul_kernel(const S* __restrict__ a, const S* __restrict__ b, S* __restrict__ out, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = a[i] * b[i];
}

template <class T, class S>
__global__ void bn_backward_elemt_kernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx, Nci g,
                                         const S* __restrict__ mean, const S* __restrict__ invstd,
                                         const S* __restrict__ weight, const S* __restrict__ sum_dy,
                                         const S* __restrict__ sum_dy_xmu, S inv_count) {
  const int64_t total = g.n * g.c * g.inner;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t c = e / g.inner % g.c;
    const S iv = invstd[c], scale = iv * (weight ? weight[c] : S(1));
    if (!sum_dy) {
      dx[e] = from_acc<T>(static_cast<S>(to_acc(dy[e])) * scale);
      continue;
    }
    const S mean_dy = sum_dy[c] * inv_count, k = iv * iv * sum_dy_xmu[c] * inv_count;
    dx[e] = from_acc<T>((static_cast<S>(to_acc(dy[e])) - mean_dy - (static_cast<S>(to_acc(x[e])) - mean[c]) * k) * scale);
  }
}

void bn_stats(const Tensor& x, Tensor& mean, Tensor& m2) {
  check_on_device("batch_norm", x.device(), {&x, &mean, &m2});
  dispatch_norm_types(x.dtype(), "batch_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const Nci g = nci_of(x);
    if (g.c == 0) return;
    Tensor ms = stat_out(mean, dtype_v<S>), m2s = stat_out(m2, dtype_v<S>);
    const Device dev = x.device();
    const int64_t splits = reduction_splits(g.c, g.n * g.inner);
    const dim3 grid(static_cast<unsigned>(splits), grid_for(g.c, 1));
    if (splits == 1) {
      TANDEM_LAUNCH(bn_stats_kernel<T, S>, grid, threads_for(g.n * g.inner), 0, stream_for(dev),
                    static_cast<const T*>(x.data_ptr()), g, splits, static_cast<S*>(ms.data_ptr()),
                    static_cast<S*>(m2s.data_ptr()));
    } else {
      Tensor pmean = Tensor::empty({g.c * splits}, dtype_v<S>, dev), pm2 = Tensor::empty({g.c * splits}, dtype_v<S>, dev);
      TANDEM_LAUNCH(bn_stats_kernel<T, S>, grid, threads_for(g.n * g.inner / splits), 0, stream_for(dev),
                    static_cast<const T*>(x.data_ptr()), g, splits, static_cast<S*>(pmean.data_ptr()),
                    static_cast<S*>(pm2.data_ptr()));
      TANDEM_LAUNCH(bn_stats_merge_kernel<S>, grid_for(g.c, kBlock), kBlock, 0, stream_for(dev),
                    static_cast<const S*>(pmean.data_ptr()), static_cast<const S*>(pm2.data_ptr()),
                    g, splits, static_cast<S*>(ms.data_ptr()), static_cast<S*>(m2s.data_ptr()));
    }
    store_stat(ms, mean);
    store_stat(m2s, m2);
  });
}

void bn_finalize(const Tensor& mean, const Tensor& m2, int64_t count, double eps, double momentum, Tensor& invstd,
                 Tensor& running_mean, Tensor& running_var) {
  const Device dev = mean.device();
  check_on_device("batch_norm", dev, {&mean, &m2, &invstd, &running_mean, &running_var});
  const int64_t C = mean.numel();
  if (C == 0) return;
  dispatch_norm_types(invstd.dtype() == DType::f64 ? DType::f64 : DType::f32, "batch_norm", [&](auto, auto s) {
    using S = decltype(s);
    Tensor ms = as_stat(mean, dtype_v<S>), m2s = as_stat(m2, dtype_v<S>), iv = stat_out(invstd, dtype_v<S>);
    const DType rdt = running_mean.defined() ? running_mean.dtype() : running_var.defined() ? running_var.dtype() : dtype_v<S>;
    TANDEM_CHECK(!running_mean.defined() || !running_var.defined() || running_mean.dtype() == running_var.dtype(),
                 "batch_norm: running_mean {} and running_var {} differ in dtype", dtype_name(running_mean.dtype()),
                 dtype_name(running_var.dtype()));
    const double denom = count > 1 ? double(count - 1) : 1.0;
    dispatch_norm_types(rdt, "batch_norm running stats", [&](auto r, auto) {
      using R = decltype(r);
      TANDEM_LAUNCH(bn_finalize_kernel<S, R>, grid_for(C, kBlock), kBlock, 0, stream_for(dev),
                    static_cast<const S*>(ms.data_ptr()), static_cast<const S*>(m2s.data_ptr()), C,
                    static_cast<S>(count), static_cast<S>(eps), momentum, denom, static_cast<S*>(iv.data_ptr()),
                    running_mean.defined() ? static_cast<R*>(running_mean.data_ptr()) : nullptr,
                    running_var.defined() ? static_cast<R*>(running_var.data_ptr()) : nullptr);
    });
    store_stat(iv, invstd);
  });
}

void bn_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias,
              Tensor& y) {
  check_on_device("batch_norm", x.device(), {&x, &mean, &invstd, &weight, &bias, &y});
  dispatch_norm_types(x.dtype(), "batch_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const DType sd = dtype_v<S>;
    const Nci g = nci_of(x);
    const int64_t total = x.numel();
    if (total == 0) return;
    Tensor ms = as_stat(mean, sd), iv = as_stat(invstd, sd), w = as_stat(weight, sd), b = as_stat(bias, sd);
    TANDEM_LAUNCH(bn_apply_kernel<T, S>, grid_for(total, kBlock), kBlock, 0, stream_for(x.device()),
                  static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), g, ptr_or_null<S>(ms),
                  ptr_or_null<S>(iv), ptr_or_null<S>(w), ptr_or_null<S>(b));
  });
}

void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd, Tensor& sum_dy,
                        Tensor& sum_dy_xmu, Tensor& grad_weight, Tensor& grad_bias) {
  const Device dev = x.device();
  check_on_device("batch_norm backward", dev, {&dy, &x, &mean, &invstd, &sum_dy, &sum_dy_xmu, &grad_weight, &grad_bias});
  dispatch_norm_types(x.dtype(), "batch_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const DType sd = dtype_v<S>;
    const Nci g = nci_of(x);
    if (g.c == 0) return;
    Tensor ms = as_stat(mean, sd), iv = as_stat(invstd, sd);
    Tensor a = sum_dy.defined() ? stat_out(sum_dy, sd) : Tensor::empty({g.c}, sd, dev);
    Tensor b = sum_dy_xmu.defined() ? stat_out(sum_dy_xmu, sd) : Tensor::empty({g.c}, sd, dev);
    const int64_t splits = reduction_splits(g.c, g.n * g.inner);
    const dim3 grid(static_cast<unsigned>(splits), grid_for(g.c, 1));
    if (splits == 1) {
      TANDEM_LAUNCH(bn_backward_reduce_kernel<T, S>, grid, threads_for(g.n * g.inner), 0, stream_for(dev),
                    static_cast<const T*>(dy.data_ptr()), static_cast<const T*>(x.data_ptr()), g, splits,
                    static_cast<const S*>(ms.data_ptr()), static_cast<S*>(a.data_ptr()), static_cast<S*>(b.data_ptr()));
    } else {
      Tensor pa = Tensor::empty({g.c * splits}, sd, dev), pb = Tensor::empty({g.c * splits}, sd, dev);
      TANDEM_LAUNCH(bn_backward_reduce_kernel<T, S>, grid, threads_for(g.n * g.inner / splits), 0, stream_for(dev),
                    static_cast<const T*>(dy.data_ptr()), static_cast<const T*>(x.data_ptr()), g, splits,
                    static_cast<const S*>(ms.data_ptr()), static_cast<S*>(pa.data_ptr()), static_cast<S*>(pb.data_ptr()));
      for (auto [part, out] : {std::pair<Tensor*, Tensor*>{&pa, &a}, {&pb, &b}})
        TANDEM_LAUNCH(sum_splits_to_kernel<S>, grid_for(g.c, kBlock), kBlock, 0, stream_for(dev),
                      static_cast<const S*>(part->data_ptr()), static_cast<S*>(out->data_ptr()), g.c, splits, splits,
                      int64_t(1), S(1), false);
    }
    store_stat(a, sum_dy);
    store_stat(b, sum_dy_xmu);
    if (grad_weight.defined()) {
      Tensor gw = stat_out(grad_weight, sd);
      TANDEM_LAUNCH(mul_kernel<S>, grid_for(g.c, kBlock), kBlock, 0, stream_for(dev), static_cast<const S*>(b.data_ptr()),
                    static_cast<const S*>(iv.data_ptr()), static_cast<S*>(gw.data_ptr()), g.c);
      store_stat(gw, grad_weight);
    }
    store_stat(a, grad_bias);
  });
}

void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                       const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count, Tensor& dx) {
  check_on_device("batch_norm backward", x.device(), {&dy, &x, &mean, &invstd, &weight, &sum_dy, &sum_dy_xmu, &dx});
  dispatch_norm_types(x.dtype(), "batch_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const DType sd = dtype_v<S>;
    const Nci g = nci_of(x);
    const int64_t total = x.numel();
    if (total == 0) return;
    Tensor ms = as_stat(mean, sd), iv = as_stat(invstd, sd), w = as_stat(weight, sd);
    Tensor a = as_stat(sum_dy, sd), b = as_stat(sum_dy_xmu, sd);
    const S inv_count = count > 0 ? S(1) / static_cast<S>(count) : S(0);
    TANDEM_LAUNCH(bn_backward_elemt_kernel<T, S>, grid_for(total, kBlock), kBlock, 0, stream_for(x.device()),
                  static_cast<const T*>(dy.data_ptr()), static_cast<const T*>(x.data_ptr()),
                  static_cast<T*>(dx.data_ptr()), g, ptr_or_null<S>(ms), ptr_or_null<S>(iv), ptr_or_null<S>(w),
                  ptr_or_null<S>(a), ptr_or_null<S>(b), inv_count);
  });
}

TANDEM_REGISTER_KERNEL(kernels::batch_norm_stats, kKind, bn_stats);
TANDEM_REGISTER_KERNEL(kernels::batch_norm_finalize, kKind, bn_finalize);
TANDEM_REGISTER_KERNEL(kernels::batch_norm_apply, kKind, bn_apply);
TANDEM_REGISTER_KERNEL(kernels::batch_norm_backward_reduce, kKind, bn_backward_reduce);
TANDEM_REGISTER_KERNEL(kernels::batch_norm_backward_elemt, kKind, bn_backward_elemt);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
