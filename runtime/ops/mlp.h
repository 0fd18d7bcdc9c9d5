// A transformer's MLP as one op (GPT-2's: linear, GELU in its tanh form, linear).
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

// linear(gelu(linear(x, w_fc, b_fc)), w_proj, b_proj): x [..., in], w_fc [hidden, in], b_fc [hidden],
// w_proj [out, hidden], b_proj [out] (biases optional) -> [..., out]. The same values as the three
// ops; its backward runs GELU's gradient and b_fc's gradient in the epilogue of the GEMM that makes
// the hidden layer's gradient (cuBLASLt's DGELU_BGRAD on CUDA) instead of two passes of their own.
Tensor mlp_gelu(const Tensor& x, const Tensor& w_fc, const Tensor& b_fc, const Tensor& w_proj,
                const Tensor& b_proj);

}  // namespace tandem::ops
