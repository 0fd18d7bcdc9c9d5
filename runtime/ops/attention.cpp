// causal_attention entry: validate, run the fused forward (output + per-row logsumexp), record a
// backward that recomputes the probabilities from q, k, v, the output and the logsumexp.
#include "runtime/ops/attention.h"

#include <cmath>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/attention.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/shape.h"

namespace tandem::ops {

namespace {

// Under autocast: the 16-bit type on a GPU, whose tensor-core kernels keep the scores, the
// logsumexp and the running rescaling in f32 inside; on the CPU, bf16 where its kernels compute on
// bf16 (AMX tiles, the same way), else f32: its f32 kernels would only convert.
AutocastCategory attention_category(const Tensor& x) {
  if (!x.device().is_cpu()) return AutocastCategory::LowPrecision;
  const std::optional<DType> dtype = autocast_dtype();
  const auto& native = kernels::attention_low_precision_native;
  return dtype && native.has(x.device().kind) && native(x.device())(x.device(), *dtype)
             ? AutocastCategory::LowPrecision
             : AutocastCategory::Float32;
}

// b x h heads of t rows of d, the scores scaled by 1/sqrt(d).
kernels::AttentionShape attention_shape(int64_t b, int64_t h, int64_t t, int64_t d) {
  kernels::AttentionShape s;
  s.b = b; s.h = h; s.t = t; s.d = d;
  s.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return s;
}

// The forward's per-row logsumexp [b, h, t]: f64 for f64 inputs, else f32.
Tensor lse_for(const Tensor& x, const kernels::AttentionShape& s) {
  return Tensor::empty({s.b, s.h, s.t}, x.dtype() == DType::f64 ? DType::f64 : DType::f32, x.device());
}

}  // namespace

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in) {
  using detail::describe;
  detail::check_defined(q_in, "causal_attention", "q");
  detail::check_defined(k_in, "causal_attention", "k");
  detail::check_defined(v_in, "causal_attention", "v");
  const AutocastCategory category = attention_category(q_in);
  Tensor q = autocast_arg(q_in, category);
  Tensor k = autocast_arg(k_in, category);
  Tensor v = autocast_arg(v_in, category);
  TANDEM_CHECK(q.dim() == 4, "causal_attention: q must be [B, H, T, D], got {}", describe(q));
  detail::check_floating("causal_attention", q);
  detail::check_compatible("causal_attention", q, k);
  detail::check_compatible("causal_attention", q, v);
  TANDEM_CHECK(k.shape() == q.shape() && v.shape() == q.shape(),
               "causal_attention: q, k, v must have one shape [B, H, T, D], got q {}, k {}, v {}",
               shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  TANDEM_CHECK(q.size(3) >= 1, "causal_attention: head dimension D must be >= 1, got {}", describe(q));

  const kernels::AttentionShape s = attention_shape(q.size(0), q.size(1), q.size(2), q.size(3));
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device()), lse = lse_for(q, s);
  kernels::attention_forward(q.device())(q, k, v, out, lse, s);
  if (!needs_grad({&q, &k, &v})) return out;

  Tensor qs = q.detach(), ks = k.detach(), vs = v.detach(), os = out.detach();
  return record("CausalAttentionBackward", {q, k, v}, out, [=](const std::vector<Tensor>& g) {
    const Tensor& dout = g[0];
    Tensor dq = Tensor::empty(qs.shape(), qs.dtype(), qs.device());
    Tensor dk = Tensor::empty(qs.shape(), qs.dtype(), qs.device());
    Tensor dv = Tensor::empty(qs.shape(), qs.dtype(), qs.device());
    kernels::attention_backward(dout.device())(qs, ks, vs, os, lse, dout, dq, dk, dv, s);
    return std::vector<Tensor>{dq, dk, dv};
  });
}

Tensor causal_self_attention(const Tensor& qkv_in, int64_t heads) {
  detail::check_defined(qkv_in, "causal_self_attention", "qkv");
  Tensor qkv = autocast_arg(qkv_in, attention_category(qkv_in));
  TANDEM_CHECK(qkv.dim() == 3 && heads >= 1 && qkv.size(2) % (3 * heads) == 0 && qkv.size(2) > 0,
               "causal_self_attention: qkv must be [B, T, 3*H*D] with H = {}, got {}", heads, detail::describe(qkv));
  detail::check_floating("causal_self_attention", qkv);
  const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / (3 * heads), c = heads * d;
  // The kernels read q, k and v where the projection wrote them and write [B, T, H*D] rows, and the
  // backward writes dq, dk and dv into qkv's gradient: no permute either way.
  kernels::AttentionShape s = attention_shape(b, heads, t, d);
  s.ld_in = 3 * c; s.ld_out = c; s.q_off = 0; s.k_off = c; s.v_off = 2 * c;
  Tensor y = Tensor::empty({b, t, c}, qkv.dtype(), qkv.device()), lse = lse_for(qkv, s);
  kernels::attention_forward(qkv.device())(qkv, qkv, qkv, y, lse, s);
  if (!needs_grad({&qkv})) return y;
  return record("CausalSelfAttentionBackward", {qkv}, y,
                [=, qkv_saved = qkv.detach(), y_saved = y.detach()](const std::vector<Tensor>& g) {
                  Tensor dqkv = Tensor::empty(qkv_saved.shape(), qkv_saved.dtype(), qkv_saved.device());
                  kernels::attention_backward(qkv_saved.device())(qkv_saved, qkv_saved, qkv_saved, y_saved, lse, g[0],
                                                                  dqkv, dqkv, dqkv, s);
                  return std::vector<Tensor>{dqkv};
                });
}

Tensor split_heads(const Tensor& x, int64_t heads) {
  detail::check_defined(x, "split_heads", "x");
  TANDEM_CHECK(x.dim() == 3 && heads >= 1 && x.size(2) % heads == 0,
               "split_heads: x must be [B, T, H*D] with H = {} dividing the last dim, got {}", heads,
               detail::describe(x));
  return permute(reshape(x, {x.size(0), x.size(1), heads, x.size(2) / heads}), {0, 2, 1, 3});
}

Tensor merge_heads(const Tensor& x) {
  detail::check_defined(x, "merge_heads", "x");
  TANDEM_CHECK(x.dim() == 4, "merge_heads: x must be [B, H, T, D], got {}", detail::describe(x));
  return reshape(permute(x, {0, 2, 1, 3}), {x.size(0), x.size(2), x.size(1) * x.size(3)});
}

std::array<Tensor, 3> split_qkv(const Tensor& qkv, int64_t heads) {
  detail::check_defined(qkv, "split_qkv", "qkv");
  TANDEM_CHECK(qkv.dim() == 3 && heads >= 1 && qkv.size(2) % (3 * heads) == 0,
               "split_qkv: qkv must be [B, T, 3*H*D] with H = {}, got {}", heads, detail::describe(qkv));
  const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / (3 * heads);
  Tensor all = permute(reshape(qkv, {b, t, 3, heads, d}), {2, 0, 3, 1, 4});  // [3, B, H, T, D]
  std::vector<Tensor> views;
  for (int64_t i = 0; i < 3; ++i) views.push_back(all.narrow0(i, 1).view({b, heads, t, d}));
  if (needs_grad({&all})) {
    // One node for the three views: backward writes dq, dk, dv into one [3, B, H, T, D] buffer
    // (three slices' backwards each zero-filled a whole buffer, and the engine summed the three).
    const Shape all_shape = all.shape();
    views = record("SplitQkvBackward", {all}, views, [=](const std::vector<Tensor>& g) {
      Tensor gx = Tensor::empty(all_shape, g[0].dtype(), g[0].device());
      for (int64_t i = 0; i < 3; ++i) gx.narrow0(i, 1).view({b, heads, t, d}).copy_(g[static_cast<size_t>(i)]);
      return std::vector<Tensor>{gx};
    });
  }
  return {views[0], views[1], views[2]};
}

}  // namespace tandem::ops
