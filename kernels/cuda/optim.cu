// Per-tensor optimizer kernels of the CUDA backend: SGD and Adam/AdamW steps (the per-element math of
// kernels/common/adam_step.h, shared with the CPU), and the sum of squares and in-place scale behind
// global-norm gradient clipping. sum_squares reduces in f64 (per-block partials, then one block).
#include "kernels/cuda/adam_elements.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/optim.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

template <class T>
__global__ void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n, SgdHyper h) {
  using A = acc_t<T>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    A pv = to_acc(p[i]), bv = buf ? A(to_acc(buf[i])) : A(0);
    sgd_update<A>(pv, to_acc(g[i]), bv, h);
    p[i] = from_acc<T>(pv);
    if (buf) buf[i] = from_acc<T>(bv);
  }
}

template <class T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v, int64_t n,
                            AdamHyper h) {
  adam_elements<T, T>(p, g, m, v, nullptr, n, h, 1.0, global_thread(), grid_threads());
}

template <class T>
__global__ void sum_squares_kernel(const T* __restrict__ x, int64_t n, double* __restrict__ partial) {
  double s = 0.0;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const double v = static_cast<double>(to_acc(x[i]));
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(const double* __restrict__ partial, int64_t n, double* __restrict__ out) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

template <class T>
__global__ void scale_kernel(T* __restrict__ x, int64_t n, acc_t<T> f) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) x[i] = from_acc<T>(to_acc(x[i]) * f);
}

void check_same(const Tensor& a, const Tensor& b, const char* what, const char* name) {
  TANDEM_CHECK(a.dtype() == b.dtype() && a.numel() == b.numel() && a.device() == b.device(),
               "{}: {} is {} {} on {} but the parameter is {} {} on {}", what, name, dtype_name(b.dtype()),
               shape_str(b.shape()), b.device().str(), dtype_name(a.dtype()), shape_str(a.shape()), a.device().str());
}

void sgd_step(Tensor& param, const Tensor& grad, Tensor& buf, const SgdHyper& h) {
  check_on_device("sgd_step", param.device(), {&param, &grad});
  check_same(param, grad, "sgd_step", "grad");
  if (h.momentum != 0.0) check_same(param, buf, "sgd_step", "momentum_buffer");
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch_floating_only(param.dtype(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(sgd_kernel<T>, grid_for(n, kBlock), kBlock, 0, stream_for(param.device()),
                  static_cast<T*>(param.data_ptr()), static_cast<const T*>(grad.data_ptr()),
                  h.momentum != 0.0 ? static_cast<T*>(buf.data_ptr()) : nullptr, n, h);
  });
}

void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamHyper& h) {
  check_on_device("adam_step", param.device(), {&param, &grad, &exp_avg, &exp_avg_sq});
  check_same(param, grad, "adam_step", "grad");
  check_same(param, exp_avg, "adam_step", "exp_avg");
  check_same(param, exp_avg_sq, "adam_step", "exp_avg_sq");
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch_floating_only(param.dtype(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(adam_kernel<T>, grid_for(n, kBlock * kPackWidth<T>), kBlock, 0, stream_for(param.device()),
                  static_cast<T*>(param.data_ptr()), static_cast<const T*>(grad.data_ptr()),
                  static_cast<T*>(exp_avg.data_ptr()), static_cast<T*>(exp_avg_sq.data_ptr()), n, h);
  });
}

double sum_squares(const Tensor& x) {
  const Device dev = x.device();
  check_on_device("sum_squares", dev, {&x});
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  const unsigned blocks = grid_for(n, kBlock);
  Tensor partial = Tensor::empty({blocks}, DType::f64, dev), total = Tensor::empty({1}, DType::f64, dev);
  dispatch_floating_only(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(sum_squares_kernel<T>, blocks, kBlock, 0, stream_for(dev), static_cast<const T*>(x.data_ptr()), n,
                  static_cast<double*>(partial.data_ptr()));
    TANDEM_LAUNCH(sum_partials_kernel, 1, 256, 0, stream_for(dev), static_cast<const double*>(partial.data_ptr()),
                  static_cast<int64_t>(blocks), static_cast<double*>(total.data_ptr()));
  });
  return total.item();  // waits for the kernels
}

void scale(Tensor& x, double factor) {
  check_on_device("scale", x.device(), {&x});
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_floating_only(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(scale_kernel<T>, grid_for(n, kBlock), kBlock, 0, stream_for(x.device()),
                  static_cast<T*>(x.data_ptr()), n, static_cast<acc_t<T>>(factor));
  });
}

TANDEM_REGISTER_KERNEL(kernels::optim_sgd_step, kKind, sgd_step);
TANDEM_REGISTER_KERNEL(kernels::optim_adam_step, kKind, adam_step);
TANDEM_REGISTER_KERNEL(kernels::optim_sum_squares, kKind, sum_squares);
TANDEM_REGISTER_KERNEL(kernels::optim_scale, kKind, scale);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
