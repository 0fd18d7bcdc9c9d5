// Causal scaled-dot-product attention as one op (flash-attention style: no [T, T] matrix is kept).
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

// q, k, v [B, H, T, D] (same shape, dtype and device) -> [B, H, T, D]:
//   out[b, h, t] = sum_{s <= t} softmax_s(q[b, h, t] . k[b, h, s] / sqrt(D)) v[b, h, s]
// Query t sees keys 0..t. Backward recomputes the probabilities from the saved output and per-row
// logsumexp. Under autocast it runs in f32 (as softmax does); f16/bf16 inputs outside autocast are
// computed with f32 accumulation and rounded once.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace tandem::ops
