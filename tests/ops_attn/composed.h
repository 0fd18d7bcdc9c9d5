// Causal attention written out with existing ops (batched matmul, an additive -inf mask, softmax,
// matmul): the reference the fused op is tested against, and the "composed" path of the benchmark.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/ops.h"

namespace tandem::testing {

// [T, T] additive mask: 0 where key s <= query t, -inf after.
inline Tensor causal_mask(int64_t t, DType dtype, Device device = kCPU) {
  std::vector<double> m(static_cast<size_t>(t * t), 0.0);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) m[static_cast<size_t>(i * t + j)] = -std::numeric_limits<double>::infinity();
  return Tensor::from_vector(m, {t, t}, dtype).to(device);
}

// q, k, v [B, H, T, D] -> [B, H, T, D], every step a differentiable op.
inline Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  const Shape s = q.shape();
  const int64_t bh = s[0] * s[1], t = s[2], d = s[3];
  Tensor q3 = ops::reshape(q, {bh, t, d}), k3 = ops::reshape(k, {bh, t, d}), v3 = ops::reshape(v, {bh, t, d});
  Tensor scores = ops::mul(ops::matmul(q3, ops::transpose(k3, 1, 2)), 1.0 / std::sqrt(static_cast<double>(d)));
  Tensor p = ops::softmax(ops::add(scores, mask), -1);
  return ops::reshape(ops::matmul(p, v3), s);
}

}  // namespace tandem::testing
