// Kernel tables of the per-tensor optimizer updates and of gradient clipping. The optimizers in
// nn/optim call these on the parameter's device; the per-element math is kernels/common/adam_step.h.
#pragma once
#include "runtime/backend/common/adam_step.h"
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// param, grad, momentum_buf: same device, dtype and numel (momentum_buf unused when momentum == 0).
TANDEM_KERNEL(optim_sgd_step, void(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdHyper& h));
// param, grad, exp_avg, exp_avg_sq: same device, dtype and numel.
TANDEM_KERNEL(optim_adam_step,
              void(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamHyper& h));
// sum of x[i]^2 accumulated in double (gradient norms).
TANDEM_KERNEL(optim_sum_squares, double(const Tensor& x));
// x *= factor in place.
TANDEM_KERNEL(optim_scale, void(Tensor& x, double factor));

}  // namespace tandem::kernels
