// mlp_gelu: the forward as linear_gelu's and linear's GEMMs (the biases and GELU in their epilogues);
// in the backward, the GEMM that makes the hidden layer's gradient applies GELU's derivative and sums
// b_fc's gradient in its epilogue (GemmArgs::dgelu_pre, c_col_sums).
#include "runtime/ops/mlp.h"

#include <algorithm>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/ops/gemm_call.h"
#include "runtime/ops/matmul.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {
namespace {

constexpr const char* kOp = "mlp_gelu";

Tensor autocast_low(const Tensor& t) { return autocast_arg(t, AutocastCategory::LowPrecision); }  // undefined stays

}  // namespace

Tensor mlp_gelu(const Tensor& x_in, const Tensor& w_fc_in, const Tensor& b_fc_in, const Tensor& w_proj_in,
                const Tensor& b_proj_in) {
  detail::check_defined(x_in, kOp, "x");
  detail::check_defined(w_fc_in, kOp, "w_fc");
  detail::check_defined(w_proj_in, kOp, "w_proj");
  Tensor x = autocast_low(x_in), w_fc = autocast_low(w_fc_in), b_fc = autocast_low(b_fc_in);
  Tensor w_proj = autocast_low(w_proj_in), b_proj = autocast_low(b_proj_in);
  detail::check_gemm_operands(kOp, x, w_fc);
  detail::check_compatible(kOp, w_fc, w_proj);
  TANDEM_CHECK(w_fc.dim() == 2 && w_proj.dim() == 2,
               "{}: the weights must be [hidden, in] and [out, hidden], got {} and {}", kOp, shape_str(w_fc.shape()),
               shape_str(w_proj.shape()));
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == w_fc.size(1),
               "{}: input {} does not match w_fc {} (input's last dim must equal in = {})", kOp,
               shape_str(x.shape()), shape_str(w_fc.shape()), w_fc.size(1));
  TANDEM_CHECK(w_proj.size(1) == w_fc.size(0), "{}: w_proj {} does not take the {} hidden features of w_fc {}", kOp,
               shape_str(w_proj.shape()), w_fc.size(0), shape_str(w_fc.shape()));
  detail::check_bias(kOp, "b_fc", w_fc, b_fc);
  detail::check_bias(kOp, "b_proj", w_proj, b_proj);
  const int64_t in = w_fc.size(1), hidden = w_fc.size(0), out_f = w_proj.size(0);
  const int64_t M = x.numel() / std::max<int64_t>(in, 1);
  // No rows or an empty dimension: nothing to fuse; the three ops handle those shapes.
  if (M == 0 || in == 0 || hidden == 0 || out_f == 0) return linear(linear_gelu(x, w_fc, b_fc), w_proj, b_proj);

  const bool grad = needs_grad({&x, &w_fc, &b_fc, &w_proj, &b_proj});
  const bool gx = x.requires_grad(), gwf = w_fc.requires_grad(), gbf = b_fc.defined() && b_fc.requires_grad();
  const bool gwp = w_proj.requires_grad(), gbp = b_proj.defined() && b_proj.requires_grad();
  const bool hidden_grad = grad && (gx || gwf || gbf);  // the backward goes through GELU
  Shape h_shape = x.shape(), y_shape = x.shape();
  h_shape.back() = hidden;
  y_shape.back() = out_f;
  Tensor h = Tensor::empty(h_shape, x.dtype(), x.device()), y = Tensor::empty(y_shape, x.dtype(), x.device());
  detail::GemmEpilogue fc;
  fc.bias = b_fc;
  fc.gelu = true;
  if (hidden_grad) fc.pre = Tensor::empty(h_shape, x.dtype(), x.device());
  detail::gemm(x, false, w_fc, true, h, M, hidden, in, 0.0, 1, 0, 0, 0, fc);
  detail::GemmEpilogue proj;
  proj.bias = b_proj;
  detail::gemm(h, false, w_proj, true, y, M, out_f, hidden, 0.0, 1, 0, 0, 0, proj);
  if (!grad) return y;

  Tensor x_saved = gwf ? x.detach() : Tensor(), h_saved = gwp ? h.detach() : Tensor(), pre = fc.pre;
  Tensor wf_saved = gx ? w_fc.detach() : Tensor(), wp_saved = hidden_grad ? w_proj.detach() : Tensor();
  const Shape sx = x.shape(), swf = w_fc.shape(), swp = w_proj.shape();
  return record("MlpGeluBackward", {x, w_fc, b_fc, w_proj, b_proj}, y,
                [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& g = grads[0];  // [M, out]
    auto [dwp, dbp] = detail::weight_bias_grads(g, h_saved, swp, gwp, gbp, 3, 4);
    Tensor dx, dwf, dbf;
    if (hidden_grad) {
      // g_pre [M, hidden] = (g @ w_proj) * gelu'(pre), b_fc's gradient its column sums: one GEMM.
      Tensor g_pre = Tensor::empty(pre.shape(), g.dtype(), g.device());
      detail::GemmEpilogue e;
      e.dgelu_pre = pre;
      if (gbf) {  // into b_fc's .grad where the engine offers it (sums_sink)
        Tensor sink = detail::sums_sink(2, g);
        e.sums_add = sink.defined();
        e.c_col_sums = e.sums_add ? sink : (dbf = Tensor::empty({hidden}, g.dtype(), g.device()));
      }
      detail::gemm(g, false, wp_saved, false, g_pre, M, hidden, out_f, 0.0, 1, 0, 0, 0, e);
      if (gx) {  // dx [M, in] = g_pre @ w_fc
        dx = Tensor::empty(sx, g.dtype(), g.device());
        detail::gemm(g_pre, false, wf_saved, false, dx, M, in, hidden);
      }
      dwf = detail::weight_bias_grads(g_pre, x_saved, swf, gwf, false, 1, 2).first;
    }
    return {dx, dwf, dbf, dwp, dbp};
  });
}

}  // namespace tandem::ops
