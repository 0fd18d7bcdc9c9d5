// softmax, log_softmax, the fused cross_entropy and mse_loss entries (computed in f32 or wider
// under autocast).
#include "runtime/ops/loss.h"


#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/env_settings.h"
#include "runtime/backend/loss.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/reduce.h"

namespace tandem::ops {
namespace {

Tensor softmax_entry(const char* name, const Tensor& x_in, int64_t dim, bool log) {
  detail::check_defined(x_in, name, "x");
  Tensor x = autocast_arg(x_in, AutocastCategory::Float32);
  detail::check_floating(name, x);
  const int64_t rank = std::max<int64_t>(x.dim(), 1);  // a 0-dim tensor is one row of one element
  const int64_t d = detail::normalize_dim(dim, rank, name);
  detail::DimSplit s = x.dim() == 0 ? detail::DimSplit{} : detail::split_at(x.shape(), d);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels::softmax(x.device())(x, y, s.outer, s.n, s.inner, log);
  if (!needs_grad({&x})) return y;
  Tensor y_saved = y.detach();
  return record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, y, [=](const std::vector<Tensor>& g) {
    Tensor gx = Tensor::empty(g[0].shape(), g[0].dtype(), g[0].device());
    kernels::softmax_backward(g[0].device())(g[0], y_saved, gx, s.outer, s.n, s.inner, log);
    return std::vector<Tensor>{gx};
  });
}

// TANDEM_CE_GRAD=backward makes cross_entropy's gradient in its backward always (A/B runs); by
// default a scalar loss makes it in its forward for loss.backward() (read once).
bool ce_grad_in_forward() {
  static const bool forward = env::choice("TANDEM_CE_GRAD") == 0;
  return forward;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_entry("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_entry("log_softmax", x, dim, true); }

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  detail::check_defined(logits_in, "cross_entropy", "logits");
  detail::check_defined(target, "cross_entropy", "target");
  // Under autocast the loss is f32. On the CPU the logits are widened to f32 (as PyTorch does); on a
  // GPU they stay as they come, 16-bit from a 16-bit classifier, which the kernels read and write
  // directly (f32 inside): a language model's [tokens, vocab] logits are its largest activation, and
  // widening them and narrowing their gradient took more GPU time than the loss itself.
  const bool autocast = autocast_dtype().has_value();
  Tensor logits = logits_in.device().is_cpu() ? autocast_arg(logits_in, AutocastCategory::Float32) : logits_in;
  detail::check_floating("cross_entropy", logits);
  TANDEM_CHECK(logits.dim() == 2, "cross_entropy: logits must be [N, C], got {}", shape_str(logits.shape()));
  TANDEM_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
               "cross_entropy: target must hold class indices (i64 or i32), got {}", detail::describe(target));
  TANDEM_CHECK(target.shape() == Shape{logits.size(0)}, "cross_entropy: target {} does not match logits {} (want [{}])",
               shape_str(target.shape()), shape_str(logits.shape()), logits.size(0));
  TANDEM_CHECK(target.device() == logits.device(), "cross_entropy: logits on {} but target on {}",
               logits.device().str(), target.device().str());
  const int64_t N = logits.size(0);
  const DType acc = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor lse = Tensor::empty({N}, acc, logits.device());
  const DType loss_dtype = autocast && is_low_precision(logits.dtype()) ? acc : logits.dtype();
  Tensor loss = Tensor::empty(reduction == Reduction::None ? Shape{N} : Shape{}, loss_dtype, logits.device());
  // A scalar loss whose backward will need the logits' gradient: made in the forward's pass over the
  // logits for a loss gradient of 1, which loss.backward() then takes as it is (a [tokens, vocab]
  // read and write fewer); any other gradient runs the backward kernel as before.
  const bool grad = needs_grad({&logits});
  Tensor unit_grad = grad && reduction != Reduction::None && ce_grad_in_forward()
                         ? Tensor::empty(logits.shape(), logits.dtype(), logits.device())
                         : Tensor();
  if (unit_grad.defined())
    kernels::cross_entropy_with_grad(logits.device())(logits, target, loss, lse, unit_grad, ignore_index, reduction);
  else
    kernels::cross_entropy(logits.device())(logits, target, loss, lse, ignore_index, reduction);
  if (!grad) return loss;
  Tensor logits_saved = logits.detach(), target_saved = target.detach();
  return record("CrossEntropyBackward", {logits}, loss, [=](const std::vector<Tensor>& g) {
    if (unit_grad.defined() && is_implicit_root_gradient(g[0])) return std::vector<Tensor>{unit_grad};
    Tensor gx = Tensor::empty(logits_saved.shape(), logits_saved.dtype(), logits_saved.device());
    kernels::cross_entropy_backward(gx.device())(g[0], logits_saved, target_saved, lse, gx, ignore_index, reduction);
    return std::vector<Tensor>{gx};
  });
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  detail::check_defined(input_in, "mse_loss", "input");
  detail::check_defined(target_in, "mse_loss", "target");
  Tensor input = autocast_arg(input_in, AutocastCategory::Float32);
  Tensor target = autocast_arg(target_in, AutocastCategory::Float32);
  detail::check_compatible("mse_loss", input, target);
  detail::check_floating("mse_loss", input);
  TANDEM_CHECK(input.shape() == target.shape(), "mse_loss: input {} and target {} must have the same shape",
               shape_str(input.shape()), shape_str(target.shape()));
  // Composed from differentiable ops: (input - target)^2, then the reduction.
  Tensor diff = sub(input, target);
  Tensor sq = mul(diff, diff);
  switch (reduction) {
    case Reduction::None: return sq;
    case Reduction::Sum: return sum(sq);
    case Reduction::Mean: return mean(sq);
  }
  return sq;
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& target_in, Reduction reduction) {
  const char* name = "binary_cross_entropy_with_logits";
  detail::check_defined(logits_in, name, "logits");
  detail::check_defined(target_in, name, "target");
  Tensor x = autocast_arg(logits_in, AutocastCategory::Float32);
  Tensor t = autocast_arg(target_in, AutocastCategory::Float32);
  detail::check_compatible(name, x, t);
  detail::check_floating(name, x);
  TANDEM_CHECK(x.shape() == t.shape(), "{}: logits {} and target {} must have the same shape", name,
               shape_str(x.shape()), shape_str(t.shape()));
  // The value from existing ops without recording them (relu and |x| have kinks at 0 whose
  // recorded gradients would give -t there); the gradient recorded in one piece instead.
  Tensor per_element;
  {
    NoGradGuard no_grad;
    const Tensor minus_abs = neg(add(relu(x), relu(neg(x))));
    per_element = add(sub(relu(x), mul(x, t)), log(add(exp(minus_abs), 1.0)));
  }
  per_element = record("BinaryCrossEntropyWithLogitsBackward", {x, t}, per_element,
                       [x, t](const std::vector<Tensor>& g) -> std::vector<Tensor> {
                         const Tensor& go = g[0];
                         return {mul(sub(sigmoid(x), t), go), mul(neg(x), go)};
                       });
  switch (reduction) {
    case Reduction::None: return per_element;
    case Reduction::Sum: return sum(per_element);
    case Reduction::Mean: return mean(per_element);
  }
  return per_element;
}

}  // namespace tandem::ops
