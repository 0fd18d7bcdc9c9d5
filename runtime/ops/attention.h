// Causal scaled-dot-product attention as one op (flash-attention style: no [T, T] matrix is kept).
#pragma once
#include <array>

#include "runtime/tensor.h"

namespace tandem::ops {

// q, k, v [B, H, T, D] (same shape, dtype and device) -> [B, H, T, D]:
//   out[b, h, t] = sum_{s <= t} softmax_s(q[b, h, t] . k[b, h, s] / sqrt(D)) v[b, h, s]
// Query t sees keys 0..t. Backward recomputes the probabilities from the saved output and per-row
// logsumexp. Under autocast it runs in f32 (as softmax does); f16/bf16 inputs outside autocast are
// computed with f32 accumulation and rounded once.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

// The layouts around it, composed of reshape (a view) and one permute (a copy of whole D-rows), with
// gradients through those ops:
// x [B, T, H*D] -> [B, H, T, D]
Tensor split_heads(const Tensor& x, int64_t heads);
// x [B, H, T, D] -> [B, T, H*D]
Tensor merge_heads(const Tensor& x);
// qkv [B, T, 3*H*D] (a fused projection's output: q, then k, then v along the last dim) ->
// {q, k, v}, each [B, H, T, D]: one permute into [3, B, H, T, D], then three views.
std::array<Tensor, 3> split_qkv(const Tensor& qkv, int64_t heads);

// merge_heads(causal_attention(split_qkv(qkv, heads))) as one op: qkv [B, T, 3*H*D] -> [B, T, H*D],
// the same values and gradients, one autograd node instead of five. The kernels read q, k, v from
// qkv's rows and write the merged output, and the backward writes qkv's gradient directly: no head
// permutes and no per-head gradient buffers.
Tensor causal_self_attention(const Tensor& qkv, int64_t heads);

}  // namespace tandem::ops
