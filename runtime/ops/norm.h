// Normalisation layers, embedding and dropout.
#pragma once
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::ops {

// x [N, C, ...]. training: normalise with batch statistics and update running_mean/var in place
// (momentum, unbiased variance, as PyTorch); eval: use the running statistics. weight/bias [C] optional.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum = 0.1, double eps = 1e-5);
// Normalises over the last `normalized_dims` dimensions; weight/bias have those dims' shape (optional).
Tensor layer_norm(const Tensor& x, int64_t normalized_dims, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5);
// indices (i32/i64) of any shape, weight [V, D] -> [..., D]
Tensor embedding(const Tensor& indices, const Tensor& weight);
// Inverted dropout: zero with probability p, scale survivors by 1/(1-p); identity when !training.
// The mask comes from one Philox draw of gen (so recomputation with the same offset reproduces it).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

}  // namespace tandem::ops
