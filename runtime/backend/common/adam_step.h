// Per-element Adam/AdamW and SGD updates (torch.optim semantics), shared by the per-tensor kernels
// and the fused multi-tensor optimizers on CPU, CUDA and the SIMT emulator. A is the math type
// (float for f32/f16/bf16 parameters, double for f64).
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/common/host_device.h"

namespace tandem {

// Hyperparameters of one Adam step on one tensor. Build it with adam_hyper() on the host: the
// bias corrections (1 - beta^step) are folded into step_size and bias_correction2_sqrt once, in
// double, so every element (and every backend) uses the same rounded values.
struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;              // AdamW: p *= decay before the update; Adam: g += wd*p (L2)
  double decay = 1.0;                  // AdamW's 1 - lr*wd
  double step_size = 1e-3;             // lr / (1 - beta1^step)
  double bias_correction2_sqrt = 1.0;  // sqrt(1 - beta2^step)
};

// `step` counts from 1 (the step being taken).
inline AdamHyper adam_hyper(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                            int64_t step) {
  AdamHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.eps = eps;
  h.weight_decay = weight_decay;
  h.decoupled = decoupled;
  h.decay = 1.0 - lr * weight_decay;
  h.step_size = lr / (1.0 - std::pow(beta1, static_cast<double>(step)));
  h.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  return h;
}

// One element of torch.optim.Adam / AdamW (amsgrad=False, maximize=False):
//   g += wd*p (Adam) | p *= 1 - lr*wd (AdamW)
//   m = beta1*m + (1-beta1)*g ; v = beta2*v + (1-beta2)*g*g
//   p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)          (eps outside the sqrt)
// Every multiply-add is an explicit fma: left to the compiler, which product it fuses depends on the
// loop around it (vectorised or not, fused multi-tensor or per tensor, host or device), and the
// backends and paths must agree bit for bit.
template <class A>
TANDEM_HD_INLINE void adam_update(A& p, A g, A& m, A& v, const AdamHyper& h) {
  const A beta1 = static_cast<A>(h.beta1), beta2 = static_cast<A>(h.beta2);
  if (h.decoupled) p = p * static_cast<A>(h.decay);
  else if (h.weight_decay != 0.0) g = std::fma(static_cast<A>(h.weight_decay), p, g);
  m = std::fma(beta1, m, (A(1) - beta1) * g);
  v = std::fma(beta2, v, (A(1) - beta2) * g * g);
  const A denom = std::sqrt(v) / static_cast<A>(h.bias_correction2_sqrt) + static_cast<A>(h.eps);
  p = std::fma(-static_cast<A>(h.step_size), m / denom, p);
}

// Hyperparameters of one SGD step on one tensor.
struct SgdHyper {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer is initialised to d_p (no dampening), as PyTorch
};

// One element of torch.optim.SGD (maximize=False). `buf` is ignored when momentum == 0.
//   d = g + wd*p ; buf = first ? d : momentum*buf + (1-dampening)*d
//   d = nesterov ? d + momentum*buf : buf ; p -= lr*d
// Multiply-adds are explicit fmas, as in adam_update.
template <class A>
TANDEM_HD_INLINE void sgd_update(A& p, A g, A& buf, const SgdHyper& h) {
  A d = g;
  if (h.weight_decay != 0.0) d = std::fma(static_cast<A>(h.weight_decay), p, d);
  if (h.momentum != 0.0) {
    const A mom = static_cast<A>(h.momentum);
    buf = h.first_step ? d : std::fma(mom, buf, (A(1) - static_cast<A>(h.dampening)) * d);
    d = h.nesterov ? std::fma(mom, buf, d) : buf;
  }
  p = std::fma(-static_cast<A>(h.lr), d, p);
}

}  // namespace tandem
