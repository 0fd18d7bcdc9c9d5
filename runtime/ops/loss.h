// Softmax family and losses (computed in f32 or f64; see the autocast policy).
#pragma once
#include "runtime/reduction.h"
#include "runtime/tensor.h"

namespace tandem::ops {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// logits [N, C], target i64 [N]; fused log-softmax + NLL; targets equal to ignore_index count
// neither in the loss nor in the mean's denominator.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// logits and target (probabilities in [0, 1]) of one shape: max(x, 0) - x*t + log(1 + exp(-|x|)) per
// element, stable for logits of any size; the gradient is sigmoid(x) - t (0.5 - t at x = 0).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

}  // namespace tandem::ops
