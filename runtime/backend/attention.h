// Kernel tables of causal attention: a fused forward that also stores the per-row logsumexp, and a
// fused backward that recomputes the probabilities tile by tile from it (flash-attention's scheme).
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// Shapes of one call: q, k, v, out [b, h, t, d] contiguous. block_q x block_k is the CPU tile
// (queries x keys); 0 lets the backend choose (tests set small tiles to exercise the edges).
struct AttentionShape {
  int64_t b = 0, h = 0, t = 0, d = 0;
  double scale = 1.0;  // applied to q . k before the softmax (the op passes 1/sqrt(d))
  int64_t block_q = 0, block_k = 0;
  int64_t heads() const { return b * h; }
};

// out [b, h, t, d] = causal softmax(q k^T * scale) v; lse [b, h, t] = log sum_{s <= t} exp(score)
// in f32 (f64 for f64 inputs). q, k, v, out: one dtype (f32, f64; f16/bf16 accumulate in f32).
TANDEM_KERNEL(attention_forward, void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                                      const AttentionShape& s));
// dq, dk, dv [b, h, t, d] (overwritten) from dout and the forward's q, k, v, out, lse.
TANDEM_KERNEL(attention_backward, void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                                       const AttentionShape& s));

}  // namespace tandem::kernels
