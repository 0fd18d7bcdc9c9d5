// The attention's unpacked tile products (small_gemm_avx512.h) on AVX2 + FMA, for CPUs without
// AVX-512: the same contract, register tiles of up to 6 rows x 16 columns.
#pragma once
#include <cstdint>

#include "kernels/cpu/small_gemm_band.h"

namespace tandem::kernels::avx2 {

// As avx512::small_gemm_f32: C = alpha * op(A) B, or (accumulate) C += alpha * op(A) B, op(A)(i, p) =
// a[i * a_row + p * a_col]; each C element sums its k products in order in f32. Needs has_f32().
void small_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                    const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                    const SmallGemmBand& band = {});

// As avx512::transpose_f32: out[p * ld_out + j] = x[j * ld_x + p] for j < rows, p < cols.
void transpose_f32(const float* x, int64_t rows, int64_t cols, int64_t ld_x, float* out, int64_t ld_out);

}  // namespace tandem::kernels::avx2
