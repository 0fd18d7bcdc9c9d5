// small_gemm_f32 on AVX2: register tiles of up to 6 rows x 16 columns (12 ymm accumulators, as the
// packed AVX2 GEMM's micro-kernel), B's two 8-column vectors loaded from its row where it lies
// (masked past n), A's values broadcast from where they lie. transpose_f32 through 8 x 8 register
// transposes, the tails element by element.
#include "kernels/cpu/small_gemm_avx2.h"

#include <utility>

#include "kernels/cpu/small_gemm_walk.h"

#include "kernels/cpu/gemm_avx2_kernels.h"

namespace tandem::kernels::avx2 {
namespace {

// FULL: all of the tile's columns are valid (8 when NARROW, else 16): plain loads and stores. Else
// masked ones (the masks then hold two registers, and a masked load is slower than a plain one: the
// attention's tiles are nearly all full, and with masks they ran at ~0.6 of the GEMM's speed).
template <int MR, bool NARROW, bool FULL>
TANDEM_AVX2 void tile(int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col, const float* b,
                      int64_t ldb, int n, float* c, int64_t ldc, bool accumulate) {
  const __m256i m0 = low_mask8(n), m1 = low_mask8(n - 8);
  auto load = [&](const float* p, __m256i m) { return FULL ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); };
  auto store = [&](float* p, __m256i m, __m256 v) {
    if (FULL)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, m, v);
  };
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = load(b, m0), b1 = NARROW ? b0 : load(b + 8, m1);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * a_row);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      if (!NARROW) c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += a_col;
    b += ldb;
  }
  const __m256 scale = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    __m256 v0 = _mm256_mul_ps(scale, c0[i]);
    if (accumulate) v0 = _mm256_add_ps(load(row, m0), v0);
    store(row, m0, v0);
    if (NARROW) continue;
    __m256 v1 = _mm256_mul_ps(scale, c1[i]);
    if (accumulate) v1 = _mm256_add_ps(load(row + 8, m1), v1);
    store(row + 8, m1, v1);
  }
}

template <bool NARROW, bool FULL, int... R>
constexpr SmallGemmTile tile_for(int rows, std::integer_sequence<int, R...>) {
  constexpr SmallGemmTile tiles[] = {tile<R + 1, NARROW, FULL>...};
  return tiles[rows - 1];
}

}  // namespace

void small_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                    const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                    const SmallGemmBand& band) {
  small_gemm_walk<kMR, kNR>(m, n, k, alpha, a, a_row, a_col, b, ldb, c, ldc, accumulate, band, [](int rows, int cols) {
    constexpr auto kRows = std::make_integer_sequence<int, kMR>{};
    if (cols <= kNR / 2)
      return cols == kNR / 2 ? tile_for<true, true>(rows, kRows) : tile_for<true, false>(rows, kRows);
    return cols == kNR ? tile_for<false, true>(rows, kRows) : tile_for<false, false>(rows, kRows);
  });
}

TANDEM_AVX2 void transpose_f32(const float* x, int64_t rows, int64_t cols, int64_t ld_x, float* out,
                               int64_t ld_out) {
  const int64_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
  for (int64_t j0 = 0; j0 < rows8; j0 += 8)
    for (int64_t p0 = 0; p0 < cols8; p0 += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(x + (j0 + i) * ld_x + p0);
      transpose8(v);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(out + (p0 + q) * ld_out + j0, v[q]);
    }
  for (int64_t j = 0; j < rows; ++j)  // the tails: rows past rows8, or columns past cols8
    for (int64_t p = j < rows8 ? cols8 : 0; p < cols; ++p) out[p * ld_out + j] = x[j * ld_x + p];
}

}  // namespace tandem::kernels::avx2
