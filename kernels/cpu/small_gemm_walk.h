// The walk over C that both ISAs' small products take (small_gemm_avx2.cpp, small_gemm_avx512.cpp):
// columns in blocks of NR; in each block the rows split evenly over ceil(m / MR) tiles (16 rows at
// MR 6: 6 + 5 + 5, not 6 + 6 + 4; 30 at MR 14: 10 + 10 + 10). The tiles themselves are each ISA's,
// picked by rows and columns (a block of at most NR / 2 columns takes a narrow tile). A causal band
// (SmallGemmBand) trims each row tile's columns or products to those its rows can need. Internal to
// kernels/cpu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/small_gemm_band.h"

namespace tandem::kernels {

// One register tile: rows of C [rows, cols] from k products, as small_gemm_f32's arguments.
using SmallGemmTile = void (*)(int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                               const float* b, int64_t ldb, int cols, float* c, int64_t ldc, bool accumulate);

// `pick(rows, cols)` gives the tile for `rows` rows (1..MR) and `cols` columns (1..NR).
template <int MR, int NR, class Pick>
void small_gemm_walk(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col,
                     const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, const SmallGemmBand& band,
                     Pick pick) {
  if (m <= 0 || n <= 0) return;
  const int64_t tiles = (m + MR - 1) / MR, base = m / tiles, extra = m % tiles;
  for (int64_t j = 0; j < n; j += NR) {
    int64_t i = 0;
    for (int64_t t = 0; t < tiles; ++t) {
      const int rows = static_cast<int>(base + (t < extra ? 1 : 0));
      const SmallGemmBand::Span s = band.span(i, i + rows, n, k);
      // Columns by half tiles (a full narrow or wide tile, not a masked one), never past n.
      const int64_t n_end = std::min(n, (s.n_end + NR / 2 - 1) / (NR / 2) * (NR / 2));
      const int cols = static_cast<int>(std::min<int64_t>(n_end - j, NR));
      // A tile wholly past its rows' band: nothing to write (columns), or zero to add (products).
      if (cols > 0 && (s.k_begin < s.k_end || !accumulate))
        pick(rows, cols)(std::max<int64_t>(s.k_end - s.k_begin, 0), alpha, a + i * a_row + s.k_begin * a_col, a_row,
                         a_col, b + s.k_begin * ldb + j, ldb, cols, c + i * ldc + j, ldc, accumulate);
      i += rows;
    }
  }
}

}  // namespace tandem::kernels
