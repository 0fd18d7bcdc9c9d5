// Causal attention on tensor cores (attention_mma_forward.cu, attention_mma_backward.cu): the path
// attention.cu takes for bf16 and f16 inputs whose head dimension is 16, 32, 64 or 128. Other calls
// keep the SIMT kernels.
#pragma once
#include "runtime/backend/attention.h"
#include "runtime/backend/cuda/platform.cuh"

namespace tandem::TANDEM_CUDA_NS {

// Whether the tensor-core kernels take a call on these tensors (every one 16-byte aligned).
bool attention_mma_fits(const kernels::AttentionShape& s, std::initializer_list<const Tensor*> tensors);

void attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                           const kernels::AttentionShape& s);
void attention_backward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv, const kernels::AttentionShape& s);

}  // namespace tandem::TANDEM_CUDA_NS
