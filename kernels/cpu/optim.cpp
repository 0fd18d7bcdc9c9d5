// CPU optimizer kernels: SGD and Adam updates on one tensor, sum of squares and in-place scaling
// for gradient clipping. Math in acc_t<T> (float for 16-bit floats).
#include "runtime/backend/optim.h"

#include "runtime/backend/multi_tensor.h"

namespace tandem::kernels {
namespace {

void check_same(const Tensor& a, const Tensor& b, const char* what, const char* name) {
  TANDEM_CHECK(a.dtype() == b.dtype() && a.numel() == b.numel() && a.device() == b.device(),
               "{}: {} is {} {} on {} but the parameter is {} {} on {}", what, name, dtype_name(b.dtype()),
               shape_str(b.shape()), b.device().str(), dtype_name(a.dtype()), shape_str(a.shape()),
               a.device().str());
}

// The per-tensor updates are the multi-tensor kernels on a list of one: one loop to keep
// vectorised, and the fused optimizers equal the per-tensor ones bit for bit by construction.
void cpu_sgd_step(Tensor& param, const Tensor& grad, Tensor& buf, const SgdHyper& h) {
  check_same(param, grad, "sgd_step", "grad");
  MultiTensorSgdArgs a;
  a.params = {param};
  a.grads = {grad};
  if (h.momentum != 0.0) {
    check_same(param, buf, "sgd_step", "momentum_buffer");
    a.momentum_bufs = {buf};
  }
  a.hypers = {h};
  multi_tensor_sgd(param.device())(a);
}

void cpu_adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamHyper& h) {
  check_same(param, grad, "adam_step", "grad");
  check_same(param, exp_avg, "adam_step", "exp_avg");
  check_same(param, exp_avg_sq, "adam_step", "exp_avg_sq");
  MultiTensorAdamArgs a;
  a.params = {param};
  a.grads = {grad};
  a.exp_avgs = {exp_avg};
  a.exp_avg_sqs = {exp_avg_sq};
  a.hypers = {h};
  multi_tensor_adam(param.device())(a);
}

double cpu_sum_squares(const Tensor& x) {
  return dispatch_floating(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* d = static_cast<const T*>(x.data_ptr());
    double s = 0.0;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      double v = static_cast<double>(static_cast<acc_t<T>>(d[i]));
      s += v * v;
    }
    return s;
  });
}

void cpu_scale(Tensor& x, double factor) {
  dispatch_floating(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    T* d = static_cast<T*>(x.data_ptr());
    const A f = static_cast<A>(factor);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) d[i] = T(static_cast<A>(d[i]) * f);
  });
}

TANDEM_REGISTER_KERNEL(optim_sgd_step, DeviceKind::CPU, cpu_sgd_step);
TANDEM_REGISTER_KERNEL(optim_adam_step, DeviceKind::CPU, cpu_adam_step);
TANDEM_REGISTER_KERNEL(optim_sum_squares, DeviceKind::CPU, cpu_sum_squares);
TANDEM_REGISTER_KERNEL(optim_scale, DeviceKind::CPU, cpu_scale);

}  // namespace
}  // namespace tandem::kernels
