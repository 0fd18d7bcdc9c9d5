// small_gemm_f32: register tiles of up to 14 rows x 32 columns (28 zmm accumulators, as the packed
// GEMM's micro-kernel), B's two 16-column vectors loaded from its row where it lies, A's 14 values
// broadcast from where they lie, columns past n masked. And transpose_f32, which lays out the keys
// and values those products read as B.
#include "kernels/cpu/small_gemm_avx512.h"

// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsics once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <utility>

#include "kernels/cpu/small_gemm_walk.h"

#include "kernels/cpu/gemm_avx512_kernels.h"

namespace tandem::kernels::avx512 {
namespace {

template <int MR, bool NARROW>
TANDEM_AVX512 void tile(int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col, const float* b,
                        int64_t ldb, int n, float* c, int64_t ldc, bool accumulate) {
  const __mmask16 m0 = low_mask16(n), m1 = low_mask16(n - 16);
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = NARROW ? b0 : _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * a_row]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      if (!NARROW) c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += a_col;
    b += ldb;
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = _mm512_mul_ps(scale, c0[i]);
    if (accumulate) v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), v0);
    _mm512_mask_storeu_ps(row, m0, v0);
    if (NARROW) continue;
    __m512 v1 = _mm512_mul_ps(scale, c1[i]);
    if (accumulate) v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), v1);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

template <bool NARROW, int... R>
constexpr SmallGemmTile tile_for(int rows, std::integer_sequence<int, R...>) {
  constexpr SmallGemmTile tiles[] = {tile<R + 1, NARROW>...};
  return tiles[rows - 1];
}

}  // namespace

void small_gemm_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                    const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                    const SmallGemmBand& band) {
  small_gemm_walk<kMR, kNR>(m, n, k, alpha, a, a_row, a_col, b, ldb, c, ldc, accumulate, band, [](int rows, int cols) {
    return cols <= kNR / 2 ? tile_for<true>(rows, std::make_integer_sequence<int, kMR>{})
                           : tile_for<false>(rows, std::make_integer_sequence<int, kMR>{});
  });
}

// 16 x 16 blocks through registers (transpose_block16), the tails masked: a scalar loop's stores,
// each to another row of out, were half of the attention's time outside its products.
TANDEM_AVX512 void transpose_f32(const float* x, int64_t rows, int64_t cols, int64_t ld_x, float* out,
                                 int64_t ld_out) {
  for (int64_t j0 = 0; j0 < rows; j0 += 16) {
    const int jn = static_cast<int>(rows - j0 < 16 ? rows - j0 : 16);
    for (int64_t p0 = 0; p0 < cols; p0 += 16) {
      const int pn = static_cast<int>(cols - p0 < 16 ? cols - p0 : 16);
      transpose_block16(reinterpret_cast<const char*>(x + j0 * ld_x + p0), ld_x * 4, jn, pn, out + p0 * ld_out + j0,
                        ld_out, jn);
    }
  }
}

}  // namespace tandem::kernels::avx512
