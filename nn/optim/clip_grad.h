// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2).
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace tandem::nn {

// Returns the global L2 norm of the parameters' gradients (accumulated in f64; parameters without
// a gradient are skipped). When it exceeds max_norm, scales every gradient in place by
// max_norm / (total + 1e-6).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The global L2 norm alone.
double grad_norm(const std::vector<Tensor>& params);
// The clipping step once `total` (the global norm) is known, however it was summed: an error for a
// non-finite total, else every defined tensor of `grads` scaled in place by max_norm / (total + 1e-6)
// when that is below 1. Returns total. (clip_grad_norm, and DDP's rank-ordered norm under ZeRO.)
double clip_to_norm(const std::vector<Tensor>& grads, double total, double max_norm);

}  // namespace tandem::nn
