// Gradient clipping through kernels::optim_sum_squares / optim_scale on each gradient's device.
#include "nn/optim/clip_grad.h"

#include <cmath>

#include "runtime/autograd.h"
#include "runtime/backend/optim.h"

namespace tandem::nn {

double grad_norm(const std::vector<Tensor>& params) {
  double sum = 0.0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) sum += kernels::optim_sum_squares(g.device())(g);
  }
  return std::sqrt(sum);
}

double clip_to_norm(const std::vector<Tensor>& grads, double total, double max_norm) {
  TANDEM_CHECK(std::isfinite(total), "clip_grad_norm: the total gradient norm is {}; a gradient holds inf or nan",
               total);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for (Tensor g : grads)  // a handle: scaled in place
      if (g.defined() && g.numel() > 0) kernels::optim_scale(g.device())(g, coef);
  }
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  TANDEM_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm {} must be > 0", max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  return clip_to_norm(grads, grad_norm(params), max_norm);
}

}  // namespace tandem::nn
