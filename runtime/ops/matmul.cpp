// matmul, linear and linear_gelu over the backend's GEMM; their backward is GEMMs too. A linear's
// bias (and GELU) ride in the GEMM's epilogue, its bias gradient in the weight gradient's GEMM.
#include "runtime/ops/matmul.h"

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/elementwise.h"
#include "runtime/backend/reduce.h"
#include "runtime/ops/gemm_call.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {

using detail::check_gemm_operands;
using detail::gemm;
using detail::gemm_sink;

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  detail::check_defined(a_in, "matmul", "a");
  detail::check_defined(b_in, "matmul", "b");
  Tensor a = autocast_arg(a_in, AutocastCategory::LowPrecision);
  Tensor b = autocast_arg(b_in, AutocastCategory::LowPrecision);
  check_gemm_operands("matmul", a, b);
  const int64_t ra = a.dim(), rb = b.dim();
  TANDEM_CHECK((ra == 2 && rb == 2) || (ra == 3 && (rb == 2 || rb == 3)),
               "matmul: supports [M, K] @ [K, N], [B, M, K] @ [B, K, N] and [B, M, K] @ [K, N]; got {} @ {}",
               shape_str(a.shape()), shape_str(b.shape()));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  TANDEM_CHECK(b.size(-2) == K, "matmul: inner dimensions differ: {} @ {} ({} vs {})", shape_str(a.shape()),
               shape_str(b.shape()), K, b.size(-2));
  const bool batched_b = rb == 3;
  const int64_t B = ra == 3 ? a.size(0) : 1;
  if (batched_b)
    TANDEM_CHECK(b.size(0) == B, "matmul: batch sizes differ: {} @ {}", shape_str(a.shape()), shape_str(b.shape()));
  Shape out_shape = ra == 3 ? Shape{B, M, N} : Shape{M, N};
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (batched_b) gemm(a, false, b, false, out, M, N, K, 0.0, B, M * K, K * N, M * N);
  else gemm(a, false, b, false, out, B * M, N, K);  // [B*M, K] @ [K, N]
  if (!needs_grad({&a, &b})) return out;

  const bool ga = a.requires_grad(), gb = b.requires_grad();
  Tensor a_saved = gb ? a.detach() : Tensor(), b_saved = ga ? b.detach() : Tensor();
  const Shape sa = a.shape(), sb = b.shape();
  return record("MatmulBackward", {a, b}, out, [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& g = grads[0];  // [.., M, N]
    Tensor da, db;
    if (ga) {  // dA = g @ B^T
      da = Tensor::empty(sa, g.dtype(), g.device());
      if (batched_b) gemm(g, false, b_saved, true, da, M, K, N, 0.0, B, M * N, K * N, M * K);
      else gemm(g, false, b_saved, true, da, B * M, K, N);
    }
    if (gb) {  // dB = A^T @ g (summed over the batch when B is shared: one GEMM over [B*M, K])
      Tensor sink = gemm_sink(1, g);
      db = sink.defined() ? sink : Tensor::empty(sb, g.dtype(), g.device());
      const double beta = sink.defined() ? 1.0 : 0.0;
      if (batched_b) gemm(a_saved, true, g, false, db, K, N, M, beta, B, M * K, M * N, K * N);
      else gemm(a_saved, true, g, false, db, K, N, B * M, beta);
      if (sink.defined()) db = Tensor();  // added to the parameter's .grad already
    }
    return {da, db};
  });
}

namespace {

// The gradients of y = x W^T + b from g = dL/dy (for linear_gelu, dL/d(its GELU's input)): dx = g W,
// dW = g^T x with db = g's column sums made by the same GEMM's epilogue. dW goes straight into the
// weight's .grad where the engine offers it (gradient_sink): no dW tensor, no pass adding it.
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Shape& sx,
                                    const Shape& sw, bool gx, bool gw, bool gbias) {
  const int64_t out_f = sw[0], in = sw[1], M = g.numel() / std::max<int64_t>(out_f, 1);
  Tensor dx;
  if (gx) {  // dx [M, in] = g [M, out] @ W [out, in]
    dx = Tensor::empty(sx, g.dtype(), g.device());
    gemm(g, false, w, false, dx, M, in, out_f);
  }
  auto [dw, db] = detail::weight_bias_grads(g, x, sw, gw, gbias, 1, 2);
  return {dx, dw, db};
}

// linear and linear_gelu: the bias (and GELU) in the GEMM's epilogue.
Tensor linear_op(const char* op, const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in, bool gelu) {
  detail::check_defined(x_in, op, "x");
  detail::check_defined(w_in, op, "weight");
  Tensor x = autocast_arg(x_in, AutocastCategory::LowPrecision);
  Tensor w = autocast_arg(w_in, AutocastCategory::LowPrecision);
  Tensor bias = autocast_arg(bias_in, AutocastCategory::LowPrecision);  // undefined stays undefined
  check_gemm_operands(op, x, w);
  TANDEM_CHECK(w.dim() == 2, "{}: weight must be [out, in], got {}", op, shape_str(w.shape()));
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1),
               "{}: input {} does not match weight {} (input's last dim must equal in = {})", op,
               shape_str(x.shape()), shape_str(w.shape()), w.size(1));
  const int64_t in = w.size(1), out_f = w.size(0), M = x.numel() / std::max<int64_t>(in, 1);
  detail::check_bias(op, "bias", w, bias);
  const bool grad = needs_grad({&x, &w, &bias});
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  detail::GemmEpilogue e;
  e.bias = bias;
  e.gelu = gelu;
  if (gelu && grad) e.pre = Tensor::empty(out_shape, x.dtype(), x.device());
  if (in == 0) {  // no product: y is the bias (or zeros), GELU'd
    y.zero_();
    if (bias.defined()) kernels::expand(y.device())(bias, y, 1.0);
    if (e.pre.defined()) e.pre.copy_(y);
    if (gelu) kernels::unary(y.device())(kernels::UnaryOp::GeluTanh, y.clone(), y, 0.0);
  } else {
    gemm(x, false, w, true, y, M, out_f, in, 0.0, 1, 0, 0, 0, e);
  }
  if (!grad) return y;

  const bool gx = x.requires_grad(), gw = w.requires_grad(), gbias = bias.defined() && bias.requires_grad();
  Tensor x_saved = gw ? x.detach() : Tensor(), w_saved = gx ? w.detach() : Tensor(), pre = e.pre;
  const Shape sx = x.shape(), sw = w.shape();
  return record(gelu ? "LinearGeluBackward" : "LinearBackward", {x, w, bias}, y,
                [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    if (!gelu) return linear_backward(grads[0], x_saved, w_saved, sx, sw, gx, gw, gbias);
    Tensor g_pre = Tensor::empty(pre.shape(), grads[0].dtype(), grads[0].device());
    kernels::unary_backward(pre.device())(kernels::UnaryOp::GeluTanh, grads[0], pre, Tensor(), g_pre, 0.0);
    return linear_backward(g_pre, x_saved, w_saved, sx, sw, gx, gw, gbias);
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) { return linear_op("linear", x, w, bias, false); }

Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias) {
  return linear_op("linear_gelu", x, w, bias, true);
}

}  // namespace tandem::ops
