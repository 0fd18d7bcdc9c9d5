// Causal attention on bf16 operands through the CPU's bf16 GEMM, used where that GEMM runs on AMX
// tiles (attention.cpp picks it; elsewhere bf16 is widened to the f32 kernels).
#pragma once
#include "runtime/backend/attention.h"
#include "runtime/backend/common/half.h"

namespace tandem::kernels {

// True where bf16 attention takes this path: the bf16 GEMM runs on AMX tiles (TANDEM_CPU_GEMM
// included, read at each call).
bool attention_bf16_on_tiles();

// As attention_forward / attention_backward (runtime/backend/attention.h) for bf16 q, k, v, out,
// dout, dq, dk, dv at s's offsets and layouts; lse f32.
void attention_forward_bf16(const bfloat16* q, const bfloat16* k, const bfloat16* v, bfloat16* out, float* lse,
                            const AttentionShape& s);
void attention_backward_bf16(const bfloat16* q, const bfloat16* k, const bfloat16* v, const bfloat16* out,
                             const float* lse, const bfloat16* dout, bfloat16* dq, bfloat16* dk, bfloat16* dv,
                             const AttentionShape& s);

}  // namespace tandem::kernels
