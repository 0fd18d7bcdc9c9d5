// The CPU side of GemmArgs' epilogue (runtime/backend/gemm.h), after the product is in C.
#pragma once
#include "runtime/backend/gemm.h"

namespace tandem::kernels {

// bias, pre and gelu, or dgelu_pre and c_col_sums, over C (alpha op(A) op(B) + beta C already there).
void cpu_gemm_epilogue(const GemmArgs& g);
// a_row_sums[i] = sum over k of op(A)[i, k], accumulated in acc_t (f32 for 16-bit types).
void cpu_gemm_a_row_sums(const GemmArgs& g);

}  // namespace tandem::kernels
