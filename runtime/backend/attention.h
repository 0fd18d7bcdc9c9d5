// Kernel tables of causal attention: a fused forward that also stores the per-row logsumexp, and a
// fused backward that recomputes the probabilities tile by tile from it (flash-attention's scheme).
#pragma once
#include <cstdint>

#include "runtime/backend/common/host_device.h"
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// Shapes of one call: q, k, v, out [b, h, t, d] contiguous unless token-major (below). block_q x
// block_k is the CPU tile (queries x keys); 0 lets the backend choose (tests set small tiles to
// exercise the edges).
//
// Token-major operands (both backends): with ld_in > 0, q, k and v are one tensor [b, t, ld_in] (a
// fused projection's output [b, t, 3 h d]) passed three times, and row r of head (batch, head) of q
// is at batch * t * ld_in + r * ld_in + head * d + q_off (k_off, v_off for k and v); dq, dk and dv
// likewise, one tensor of that layout. With ld_out > 0, out and dout are [b, t, ld_out] (heads
// merged: [b, t, h d] for ld_out = h d). The head split and merge permutes are then not needed.
struct AttentionShape {
  int64_t b = 0, h = 0, t = 0, d = 0;
  double scale = 1.0;  // applied to q . k before the softmax (the op passes 1/sqrt(d))
  int64_t block_q = 0, block_k = 0;
  int64_t ld_in = 0, ld_out = 0, q_off = 0, k_off = 0, v_off = 0;
  int64_t heads() const { return b * h; }
  bool token_major() const { return ld_in > 0 || ld_out > 0; }
};

// Where the rows of head bh = batch * h + head of one operand start, and how far apart they are
// (elements), for the kernels: contiguous heads, or token-major rows of ld elements.
struct HeadRows {
  int64_t h = 1, batch = 0, head = 0, row = 0;
  TANDEM_HD int64_t base(int64_t bh) const { return (bh / h) * batch + (bh % h) * head; }
};
inline HeadRows head_rows(const AttentionShape& s, int64_t ld) {
  if (ld > 0) return HeadRows{s.h, s.t * ld, s.d, ld};
  return HeadRows{s.h, s.h * s.t * s.d, s.t * s.d, s.d};
}

// out [b, h, t, d] = causal softmax(q k^T * scale) v; lse [b, h, t] = log sum_{s <= t} exp(score)
// in f32 (f64 for f64 inputs). q, k, v, out: one dtype (f32, f64; f16/bf16 accumulate in f32).
TANDEM_KERNEL(attention_forward, void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                                      const AttentionShape& s));
// dq, dk, dv [b, h, t, d] (overwritten) from dout and the forward's q, k, v, out, lse.
TANDEM_KERNEL(attention_backward, void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                                       const AttentionShape& s));

// Whether the device's kernels compute attention on `dtype` operands themselves, so that autocast
// hands them 16-bit tensors instead of f32 ones (the op asks it only of the CPU: a GPU's tensor-core
// kernels always do). CPU: bf16 where its bf16 GEMM runs on AMX tiles; f16 is widened there.
TANDEM_KERNEL(attention_low_precision_native, bool(Device device, DType dtype));

}  // namespace tandem::kernels
