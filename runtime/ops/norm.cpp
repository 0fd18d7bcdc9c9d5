// batch_norm entry and its non-differentiable building blocks (the stages SyncBatchNorm reuses with
// all-reduced statistics), and layer_norm.
#include "runtime/ops/norm.h"

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/norm.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/pool.h"
#include "runtime/ops/shape.h"

namespace tandem::ops {
namespace {

// weight, bias, running stats: [C], x's device, x's dtype or the statistics dtype.
void check_channel_param(const char* op, const char* what, const Tensor& t, const Tensor& x, int64_t c) {
  if (!t.defined()) return;
  TANDEM_CHECK(t.dim() == 1 && t.size(0) == c, "{}: {} must have shape [{}] for input {}, got {}", op, what, c,
               shape_str(x.shape()), detail::describe(t));
  TANDEM_CHECK(t.device() == x.device(), "{}: {} is on {} but the input is on {}", op, what, t.device().str(),
               x.device().str());
  TANDEM_CHECK(t.dtype() == x.dtype() || t.dtype() == batch_norm_stat_dtype(x.dtype()),
               "{}: {} has dtype {}; it must match the input ({}) or be {}", op, what, dtype_name(t.dtype()),
               dtype_name(x.dtype()), dtype_name(batch_norm_stat_dtype(x.dtype())));
}

void check_bn_input(const char* op, const Tensor& x) {
  detail::check_defined(x, op, "input");
  TANDEM_CHECK(x.dim() >= 2, "{}: input must be [N, C] or [N, C, H, W], got {}", op, detail::describe(x));
  detail::check_floating(op, x);
}

Tensor stat_tensor(const Tensor& x) {
  return Tensor::empty({x.size(1)}, batch_norm_stat_dtype(x.dtype()), x.device());
}

}  // namespace

DType batch_norm_stat_dtype(DType x_dtype) { return x_dtype == DType::f64 ? DType::f64 : DType::f32; }

BatchNormStats batch_norm_stats(const Tensor& x) {
  check_bn_input("batch_norm_stats", x);
  BatchNormStats s{stat_tensor(x), stat_tensor(x), x.numel() / std::max<int64_t>(x.size(1), 1)};
  kernels::batch_norm_stats(x.device())(x, s.mean, s.m2);
  return s;
}

Tensor batch_norm_invstd(const Tensor& mean, const Tensor& m2, int64_t count, double eps, Tensor running_mean,
                         Tensor running_var, double momentum) {
  TANDEM_CHECK(count >= 1, "batch_norm_invstd: count must be >= 1, got {}", count);
  Tensor invstd = Tensor::empty(m2.shape(), m2.dtype() == DType::f64 ? DType::f64 : DType::f32, m2.device());
  kernels::batch_norm_finalize(m2.device())(mean, m2, count, eps, momentum, invstd, running_mean, running_var);
  return invstd;
}

Tensor batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                        const Tensor& bias) {
  check_bn_input("batch_norm_apply", x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels::batch_norm_apply(x.device())(x, mean, invstd, weight, bias, y);
  return y;
}

BatchNormBackwardSums batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                                 const Tensor& invstd, const Tensor& weight, const Tensor& bias) {
  check_bn_input("batch_norm_backward_reduce", x);
  TANDEM_CHECK(dy.shape() == x.shape() && dy.dtype() == x.dtype(),
               "batch_norm_backward_reduce: dy {} does not match x {}", detail::describe(dy), detail::describe(x));
  BatchNormBackwardSums r;
  r.sum_dy = stat_tensor(x);
  r.sum_dy_xmu = stat_tensor(x);
  if (weight.defined()) r.grad_weight = Tensor::empty(weight.shape(), weight.dtype(), weight.device());
  if (bias.defined()) r.grad_bias = Tensor::empty(bias.shape(), bias.dtype(), bias.device());
  kernels::batch_norm_backward_reduce(x.device())(dy, x, mean, invstd, r.sum_dy, r.sum_dy_xmu, r.grad_weight,
                                                  r.grad_bias);
  return r;
}

Tensor batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                                 int64_t count) {
  check_bn_input("batch_norm_backward_elemt", x);
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels::batch_norm_backward_elemt(x.device())(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count, dx);
  return dx;
}

Tensor batch_norm_epilogue(const Tensor& y, const BatchNormEpilogue& epilogue) {
  Tensor out = epilogue.relu ? relu(y) : y;
  if (epilogue.max_pool) out = max_pool2d(out, epilogue.pool_kernel, epilogue.pool_stride, epilogue.pool_padding);
  return out;
}

Tensor batch_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum, double eps, const BatchNormEpilogue& epilogue) {
  check_bn_input("batch_norm", x_in);
  const bool fused = training && kernels::batch_norm_forward_fused.has(x_in.device().kind) &&
                     kernels::batch_norm_backward_fused.has(x_in.device().kind);
  // Under autocast, batch norm keeps a 16-bit input's dtype, as PyTorch's autocast does (batch_norm
  // is on neither of its lists): the f32 batch norm of x cast to f32, its output (after the epilogue)
  // cast back, so that the relu, the pool and the next convolution run on 16-bit activations with no
  // casts between them. The fused kernels compute exactly that without the casts' passes (`widened`);
  // elsewhere the casts run.
  const bool widened = autocast_dtype().has_value() && is_low_precision(x_in.dtype());
  if (widened && !fused)
    return cast(batch_norm(cast(x_in, DType::f32), weight, bias, std::move(running_mean), std::move(running_var),
                           training, momentum, eps, epilogue),
                x_in.dtype());
  const Tensor& x = x_in;
  const int64_t c = x.size(1);
  check_channel_param("batch_norm", "weight", weight, x, c);
  check_channel_param("batch_norm", "bias", bias, x, c);
  check_channel_param("batch_norm", "running_mean", running_mean, x, c);
  check_channel_param("batch_norm", "running_var", running_var, x, c);
  TANDEM_CHECK(running_mean.defined() == running_var.defined(),
               "batch_norm: give both running_mean and running_var or neither");
  const int64_t count = x.numel() / std::max<int64_t>(c, 1);

  // On backends with the fused kernels (CPU), training visits each channel's data twice back to back
  // (cache-hot) and runs the epilogue inside; elsewhere the stages run one after another, exactly as
  // SyncBatchNorm runs them, and the epilogue's ops follow.
  if (!fused && (epilogue.relu || epilogue.max_pool))
    return batch_norm_epilogue(batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps),
                               epilogue);
  kernels::BatchNormEpilogue epi;
  epi.relu = epilogue.relu;
  epi.max_pool = epilogue.max_pool;
  epi.widened = widened;
  if (epi.max_pool)
    epi.pool = detail::pool_geometry("batch_norm (max_pool2d epilogue)", x, epilogue.pool_kernel,
                                     epilogue.pool_stride, epilogue.pool_padding);
  Tensor mean, invstd, y, argmax;
  {
    NoGradGuard no_grad;  // the statistics are computed from x inside this op's own backward
    if (training) {
      TANDEM_CHECK(count > 1, "batch_norm: expected more than 1 value per channel when training, got input {}",
                   shape_str(x.shape()));
      BatchNormStats s;
      if (fused) {
        s = {stat_tensor(x), stat_tensor(x), count};
        invstd = stat_tensor(x);
        if (epi.max_pool) {
          const Shape pooled{epi.pool.n, epi.pool.c, epi.pool.ho, epi.pool.wo};
          y = Tensor::empty(pooled, x.dtype(), x.device());
          argmax = Tensor::empty(pooled, DType::i32, x.device());
        } else {
          y = Tensor::empty(x.shape(), x.dtype(), x.device());
        }
        kernels::batch_norm_forward_fused(x.device())(x, weight, bias, eps, epi, y, argmax, s.mean, s.m2, invstd);
        if (running_mean.defined())  // recomputes the same invstd and updates the running stats
          invstd = batch_norm_invstd(s.mean, s.m2, count, eps, running_mean, running_var, momentum);
      } else {
        s = batch_norm_stats(x);
        invstd = batch_norm_invstd(s.mean, s.m2, count, eps, running_mean, running_var, momentum);
      }
      mean = s.mean;
    } else {
      TANDEM_CHECK(running_mean.defined(), "batch_norm: eval mode needs running_mean and running_var");
      // Copies in the statistics dtype: later training steps update the running stats in place.
      const DType sd = batch_norm_stat_dtype(x.dtype());
      mean = Tensor::empty({c}, sd, x.device());
      mean.copy_(running_mean);
      Tensor var = Tensor::empty({c}, sd, x.device());
      var.copy_(running_var);
      invstd = batch_norm_invstd(mean, var, 1, eps);
    }
  }
  if (!y.defined()) y = batch_norm_apply(x, mean, invstd, weight, bias);
  if (!needs_grad({&x, &weight, &bias})) return y;

  const bool gx = x.requires_grad(), gw = weight.defined() && weight.requires_grad(),
             gb = bias.defined() && bias.requires_grad();
  Tensor x_saved = x.detach(), w_saved = weight.defined() ? weight.detach() : Tensor();
  // relu without a pool recomputes its mask from x, weight and bias (with a pool it is in the argmax)
  Tensor b_saved = epi.relu && !epi.max_pool && bias.defined() ? bias.detach() : Tensor();
  const DType bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
  const char* name = epi.max_pool ? (epi.relu ? "BatchNormReluMaxPoolBackward" : "BatchNormMaxPoolBackward")
                                  : (epi.relu ? "BatchNormReluBackward" : "BatchNormBackward");
  return record(name, {x, weight, bias}, y, [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];
    if (fused) {
      Tensor dx = gx ? Tensor::empty(x_saved.shape(), x_saved.dtype(), dy.device()) : Tensor();
      Tensor dw = gw ? Tensor::empty({c}, w_saved.dtype(), dy.device()) : Tensor();
      Tensor db = gb ? Tensor::empty({c}, bias_dtype, dy.device()) : Tensor();
      kernels::batch_norm_backward_fused(dy.device())(dy, argmax, x_saved, mean, invstd, w_saved, b_saved, epi, dx,
                                                      dw, db);
      return {dx, dw, db};
    }
    // The reduce stage's bias argument only selects whether (and in which dtype) grad_bias is made.
    Tensor bias_like = gb ? Tensor::empty({c}, bias_dtype, dy.device()) : Tensor();
    BatchNormBackwardSums r =
        batch_norm_backward_reduce(dy, x_saved, mean, invstd, gw ? w_saved : Tensor(), bias_like);
    Tensor dx;
    if (gx)
      dx = training ? batch_norm_backward_elemt(dy, x_saved, mean, invstd, w_saved, r.sum_dy, r.sum_dy_xmu, count)
                    : batch_norm_backward_elemt(dy, x_saved, mean, invstd, w_saved, Tensor(), Tensor(), count);
    return {dx, r.grad_weight, r.grad_bias};
  });
}

namespace {

// layer_norm's checks; returns x's normalised shape.
Shape check_layer_norm(const char* what, const Tensor& x, int64_t normalized_dims, const Tensor& weight,
                       const Tensor& bias) {
  detail::check_floating(what, x);
  TANDEM_CHECK(normalized_dims >= 1 && normalized_dims <= x.dim(),
               "{}: normalized_dims must be in [1, {}] for input {}, got {}", what, x.dim(), shape_str(x.shape()),
               normalized_dims);
  const Shape norm_shape(x.shape().end() - normalized_dims, x.shape().end());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TANDEM_CHECK(p->shape() == norm_shape, "{}: {} must have shape {} (the last {} dims of input {}), got {}", what,
                 p == &weight ? "weight" : "bias", shape_str(norm_shape), normalized_dims, shape_str(x.shape()),
                 detail::describe(*p));
    TANDEM_CHECK(p->device() == x.device() && (p->dtype() == x.dtype() || p->dtype() == batch_norm_stat_dtype(x.dtype())),
                 "{}: {} is {}; it must be on the input's device with its dtype ({})", what,
                 p == &weight ? "weight" : "bias", detail::describe(*p), detail::describe(x));
  }
  return norm_shape;
}

// What a LayerNorm's backward reads, saved by its forward.
struct LayerNormSaved {
  Tensor x, weight, mean, rstd;  // x: the normalised input (detached)
  Shape norm_shape;
  DType weight_dtype, bias_dtype;
  bool gw, gb;  // the parameters' gradients are wanted
};

LayerNormSaved save_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& mean,
                               const Tensor& rstd, const Shape& norm_shape) {
  return {x.detach(),
          weight.defined() ? weight.detach() : Tensor(),
          mean,
          rstd,
          norm_shape,
          weight.defined() ? weight.dtype() : x.dtype(),
          bias.defined() ? bias.dtype() : x.dtype(),
          weight.defined() && weight.requires_grad(),
          bias.defined() && bias.requires_grad()};
}

// The parameters' gradients from a LayerNorm backward, with `dx` (undefined: not wanted) and how it
// is added (adds.dx, adds.residual): runs the kernel and returns {dweight, dbias}, undefined where
// they were added straight into their .grad (gradient_sink of the running node's inputs
// `weight_input` and the one after it, in the statistics' dtype: no [D] tensors, no passes adding
// them).
std::pair<Tensor, Tensor> layer_norm_backward_into(const Tensor& dy, const LayerNormSaved& s, size_t weight_input,
                                                   Tensor& dx, kernels::LayerNormGradAdds adds) {
  const DType sd = batch_norm_stat_dtype(s.x.dtype());
  const Tensor sink_w = s.gw ? gradient_sink(weight_input) : Tensor(),
               sink_b = s.gb ? gradient_sink(weight_input + 1) : Tensor();
  auto usable = [&](bool wanted, const Tensor& sink) { return !wanted || (sink.defined() && sink.dtype() == sd); };
  adds.params = (s.gw || s.gb) && usable(s.gw, sink_w) && usable(s.gb, sink_b);
  Tensor dw = !s.gw ? Tensor() : adds.params ? sink_w : Tensor::empty(s.norm_shape, s.weight_dtype, dy.device());
  Tensor db = !s.gb ? Tensor() : adds.params ? sink_b : Tensor::empty(s.norm_shape, s.bias_dtype, dy.device());
  kernels::layer_norm_backward(dy.device())(dy, s.x, s.mean, s.rstd, s.weight, dx, dw, db, adds);
  if (adds.params) return {};
  return {dw, db};
}

}  // namespace

Tensor layer_norm(const Tensor& x_in, int64_t normalized_dims, const Tensor& weight, const Tensor& bias,
                  double eps, std::optional<DType> out_dtype) {
  detail::check_defined(x_in, "layer_norm", "input");
  Tensor x = autocast_arg(x_in, AutocastCategory::Float32);
  const Shape norm_shape = check_layer_norm("layer_norm", x, normalized_dims, weight, bias);
  const int64_t d = shape_numel(norm_shape), m = d ? x.numel() / d : 0;
  const DType sd = batch_norm_stat_dtype(x.dtype()), yd = out_dtype.value_or(x.dtype());
  kernels::check_layer_norm_output_dtype("layer_norm", x.dtype(), yd);
  Tensor y = Tensor::empty(x.shape(), yd, x.device());
  Tensor mean = Tensor::empty({m}, sd, x.device()), rstd = Tensor::empty({m}, sd, x.device());
  kernels::layer_norm_forward(x.device())(x, weight, bias, eps, y, mean, rstd);
  if (!needs_grad({&x, &weight, &bias})) return y;

  const bool gx = x.requires_grad();
  const LayerNormSaved saved = save_layer_norm(x, weight, bias, mean, rstd, norm_shape);
  return record("LayerNormBackward", {x, weight, bias}, y,
                [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
                  const Tensor& dy = grads[0];
                  // dx is added to the input's gradient summed so far where the engine offers it
                  // (gradient_sink: a residual stream's, x + f(LayerNorm(x))): no dx tensor, no pass
                  // adding it (a read and a write of [M, D] less).
                  const Tensor sink_x = gx ? gradient_sink(0, SinkOf::AnyInput) : Tensor();
                  kernels::LayerNormGradAdds adds;
                  adds.dx = sink_x.defined() && sink_x.dtype() == saved.x.dtype();
                  Tensor dx = !gx      ? Tensor()
                              : adds.dx ? sink_x
                                        : Tensor::empty(saved.x.shape(), saved.x.dtype(), dy.device());
                  auto [dw, db] = layer_norm_backward_into(dy, saved, 1, dx, adds);
                  return {adds.dx ? Tensor() : dx, dw, db};
                });
}

AddLayerNorm add_layer_norm(const Tensor& x, const Tensor& branch, int64_t normalized_dims, const Tensor& weight,
                            const Tensor& bias, double eps, std::optional<DType> out_dtype) {
  detail::check_defined(x, "add_layer_norm", "x");
  detail::check_defined(branch, "add_layer_norm", "branch");
  // One pass where the add keeps x's dtype (the branch's equal or narrower: autocast's residual
  // stream) and autocast leaves the sum as it is; anything else as the two ops.
  const bool fits = x.shape() == branch.shape() && x.device() == branch.device() && is_floating(branch.dtype()) &&
                    kernels::layer_norm_dtype_fits(x.dtype(), branch.dtype()) &&
                    autocast_arg(x, AutocastCategory::Float32).dtype() == x.dtype();
  if (!fits) {
    Tensor sum = add(x, branch);
    return {sum, layer_norm(sum, normalized_dims, weight, bias, eps, out_dtype)};
  }
  const Shape norm_shape = check_layer_norm("add_layer_norm", x, normalized_dims, weight, bias);
  const int64_t d = shape_numel(norm_shape), m = d ? x.numel() / d : 0;
  const DType sd = batch_norm_stat_dtype(x.dtype()), yd = out_dtype.value_or(x.dtype());
  kernels::check_layer_norm_output_dtype("add_layer_norm", x.dtype(), yd);
  Tensor sum = Tensor::empty(x.shape(), x.dtype(), x.device()), y = Tensor::empty(x.shape(), yd, x.device());
  Tensor mean = Tensor::empty({m}, sd, x.device()), rstd = Tensor::empty({m}, sd, x.device());
  kernels::add_layer_norm_forward(x.device())(x, branch, weight, bias, eps, sum, y, mean, rstd);
  if (!needs_grad({&x, &branch, &weight, &bias})) return {sum, y};

  const bool gx = x.requires_grad(), gbranch = branch.requires_grad();
  const DType branch_dtype = branch.dtype();
  const LayerNormSaved saved = save_layer_norm(sum, weight, bias, mean, rstd, norm_shape);
  std::vector<Tensor> out = record(
      "AddLayerNormBackward", {x, branch, weight, bias}, {sum, y},
      [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
        // The sum's gradient is its other consumers' (grads[0]) plus the LayerNorm's dx, made in one
        // pass; it is x's, and the branch's in the branch's dtype (rounded as the kernel stores it).
        const Tensor &g_sum = grads[0], &dy = grads[1];
        kernels::LayerNormGradAdds adds;
        Tensor dx;
        if (gx || gbranch) {
          adds.residual = g_sum;
          dx = Tensor::empty(saved.x.shape(), saved.x.dtype(), dy.device());
          if (gbranch && branch_dtype != saved.x.dtype())
            adds.dx_narrow = Tensor::empty(saved.x.shape(), branch_dtype, dy.device());
        }
        auto [dw, db] = layer_norm_backward_into(dy, saved, 2, dx, adds);
        Tensor dbranch = !gbranch ? Tensor() : adds.dx_narrow.defined() ? adds.dx_narrow : dx;
        return {gx ? dx : Tensor(), dbranch, dw, db};
      });
  return {out[0], out[1]};
}

}  // namespace tandem::ops
