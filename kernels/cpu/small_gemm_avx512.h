// Products of operands that already sit in L1/L2 (the CPU attention's tiles), on AVX-512 without
// packing: the packed GEMM (gemm_avx512.cpp) spends as long copying such small operands into panels
// as multiplying them, and Eigen's does too.
#pragma once
#include <cstdint>

#include "kernels/cpu/small_gemm_band.h"

namespace tandem::kernels::avx512 {

// C = alpha * op(A) B, or (accumulate) C += alpha * op(A) B, for C [m, n] row-major with rows ldc
// apart, B [k, n] row-major with rows ldb apart, and op(A) [m, k] whose element (i, p) is
// a[i * a_row + p * a_col] (a row-major A: a_row = lda, a_col = 1; a transposed one: a_row = 1,
// a_col = lda). Each C element sums its k products in order (p = 0, 1, ...) in f32. band: what a
// causal band lets it skip (small_gemm_band.h), columns or zero products; with B finite, skipping a
// zero product changes no nonzero sum. Needs has_f32().
void small_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                    const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                    const SmallGemmBand& band = {});

// out[p * ld_out + j] = x[j * ld_x + p] for j < rows, p < cols: x [rows, cols] transposed into out
// [cols, rows] (the attention's keys and values, [t, d] -> [d, t], for the products that read them as
// B). Nothing else of out is written. Needs has_f32().
void transpose_f32(const float* x, int64_t rows, int64_t cols, int64_t ld_x, float* out, int64_t ld_out);

}  // namespace tandem::kernels::avx512
