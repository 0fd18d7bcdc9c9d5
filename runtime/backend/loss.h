// Softmax and loss kernel tables. Softmax works on x viewed as [outer, n, inner] (the softmax dim
// in the middle; inner == 1 is the fast, contiguous case).
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/dtype.h"
#include "runtime/reduction.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// y = softmax(x) (or log_softmax when `log`) over n. x, y [outer, n, inner]: same dtype
// (floating), device. Max-subtracted, computed in acc_t<T>.
TANDEM_KERNEL(softmax, void(const Tensor& x, Tensor& y, int64_t outer, int64_t n, int64_t inner, bool log));

// Given y (the forward output) and grad_y:
//   softmax:      grad_x = y * (grad_y - sum_n(grad_y * y))
//   log_softmax:  grad_x = grad_y - exp(y) * sum_n(grad_y)
TANDEM_KERNEL(softmax_backward, void(const Tensor& grad_y, const Tensor& y, Tensor& grad_x, int64_t outer,
                                     int64_t n, int64_t inner, bool log));

// Fused log-softmax + NLL. logits [N, C] (floating), target [N] (i64 or i32), lse [N] in the
// accumulation dtype (f32 for f16/bf16/f32, f64 for f64) receives each row's log-sum-exp (saved for
// backward). loss: [N] for Reduction::None (0 on ignored rows), [] for Sum and Mean; the logits'
// dtype or their accumulation dtype (f32 for f16/bf16 logits: autocast's loss of a 16-bit classifier).
// Mean divides by the number of rows whose target != ignore_index (0/0 = NaN, as PyTorch).
// A target outside [0, C) that is not ignore_index: the CPU backend throws ValueError.
TANDEM_KERNEL(cross_entropy, void(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                                  int64_t ignore_index, ops::Reduction reduction));

// grad_logits [N, C] (logits' dtype) = (softmax(logits) - onehot(target)) * g / count, with
// g = grad_loss (the loss's dtype; [N] for None, [] otherwise), count = number of non-ignored rows for
// Mean, 1 otherwise; ignored rows get 0. softmax(logits) is exp(logits - lse).
TANDEM_KERNEL(cross_entropy_backward, void(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                                           const Tensor& lse, Tensor& grad_logits, int64_t ignore_index,
                                           ops::Reduction reduction));

// cross_entropy (Sum or Mean) and, in the same pass over the logits, cross_entropy_backward's
// grad_logits for a loss gradient of 1: the same loss, lse and gradient bit for bit, with one read
// of the logits fewer (the loss of a language model, whose [tokens, vocab] logits are its largest
// tensor, and whose backward mostly starts from the loss with a gradient of 1).
TANDEM_KERNEL(cross_entropy_with_grad, void(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                                            Tensor& grad_logits, int64_t ignore_index, ops::Reduction reduction));

// f(L{}) with L the loss's element type: the logits' T, or acc_t<T> (cross_entropy's loss dtype rule).
template <class T, class F>
void with_loss_type(DType loss, F&& f) {
  if (loss == dtype_v<T>) return f(T{});
  TANDEM_CHECK(loss == dtype_v<acc_t<T>>, "cross_entropy: loss dtype {} for {} logits (want {} or {})",
               dtype_name(loss), dtype_name(dtype_v<T>), dtype_name(dtype_v<T>), dtype_name(dtype_v<acc_t<T>>));
  return f(acc_t<T>{});
}

}  // namespace tandem::kernels
