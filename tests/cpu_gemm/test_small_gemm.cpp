// small_gemm_f32 (the CPU attention's unpacked tile products) against an f64 reference: every row
// count of a register tile and several tiles, column tails on both 16-lane halves, empty K, A read
// row-major and transposed with padded strides, B and C with padded rows, overwrite and accumulate,
// alpha; nothing outside C's [m, n] written; causal bands. And transpose_f32, which lays out their B
// operands. Both the AVX-512 kernels and the AVX2 ones (which the _avx2 run reaches through the
// attention too).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/small_gemm_avx2.h"
#include "kernels/cpu/small_gemm_avx512.h"
#include "kernels/cpu/small_gemm_band.h"

namespace {

// Both ISAs' kernels where the CPU (and TANDEM_CPU_ISA) allows them: AVX-512 (14 x 32 tiles), AVX2 (6 x 16).
using SmallGemm = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                           float*, int64_t, bool, const tandem::kernels::SmallGemmBand&);
void check_small_gemm(SmallGemm small_gemm_f32);

TEST(SmallGemmF32, MatchesTheF64ProductOverEveryTail) {
  if (!tandem::kernels::avx512::has_f32()) GTEST_SKIP() << "no AVX-512 on this CPU";
  check_small_gemm(&tandem::kernels::avx512::small_gemm_f32);
}

TEST(SmallGemmF32, Avx2MatchesTheF64ProductOverEveryTail) {
  if (!tandem::kernels::avx2::has_f32()) GTEST_SKIP() << "no AVX2/FMA on this CPU, or TANDEM_CPU_ISA=generic";
  check_small_gemm(&tandem::kernels::avx2::small_gemm_f32);
}

void check_small_gemm(SmallGemm small_gemm_f32) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t m : {1, 2, 13, 14, 15, 29, 32, 45})
    for (int64_t n : {1, 8, 15, 16, 17, 24, 31, 32, 33, 64, 70})
      for (int64_t k : {0, 1, 7, 64, 129})
        for (bool transposed : {false, true})
          for (bool accumulate : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " transposed "
                                              << transposed << " accumulate " << accumulate);
            // A stored [m, k] (rows lda apart) or, transposed, [k, m]; B [k, n]; C [m, n]; all padded.
            const int64_t lda = (transposed ? m : k) + 3, ldb = n + 5, ldc = n + 7;
            const int64_t a_row = transposed ? 1 : lda, a_col = transposed ? lda : 1;
            std::vector<float> a(static_cast<size_t>((transposed ? k : m) * lda + 1)), b(static_cast<size_t>(k * ldb + 1));
            std::vector<float> c(static_cast<size_t>(m * ldc + 1));
            for (float& x : a) x = u(rng);
            for (float& x : b) x = u(rng);
            for (float& x : c) x = u(rng);
            const std::vector<float> c0 = c;
            const float alpha = 0.75f;
            small_gemm_f32(m, n, k, alpha, a.data(), a_row, a_col, b.data(), ldb, c.data(), ldc, accumulate, {});
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < ldc && i * ldc + j < static_cast<int64_t>(c.size()); ++j) {
                const size_t at = static_cast<size_t>(i * ldc + j);
                if (j >= n) {
                  ASSERT_EQ(c[at], c0[at]) << "wrote padding at " << i << ", " << j;
                  continue;
                }
                double sum = 0, bound = 0;
                for (int64_t p = 0; p < k; ++p) {
                  const double x = a[static_cast<size_t>(i * a_row + p * a_col)], y = b[static_cast<size_t>(p * ldb + j)];
                  sum += x * y;
                  bound += std::abs(x * y);
                }
                const double want = (accumulate ? c0[at] : 0.0) + alpha * sum;
                const double tol = (k + 2) * 6e-8 * (alpha * bound + (accumulate ? std::abs(c0[at]) : 0.0)) + 1e-30;
                ASSERT_NEAR(c[at], want, tol) << "at " << i << ", " << j;
              }
            ASSERT_EQ(c.back(), c0.back());  // past the last row
          }
}

// A causal band (small_gemm_band.h) skips work, never changes a needed value: with A zero outside a
// k_end or k_begin band, every element has the unbanded product's bits (the skipped products are
// zeros; tiles wholly outside are skipped or, overwriting, write zero); under a cols band, the
// entries within it have the unbanded bits and nothing past n is written. Shifts put the band's
// edge before, inside and past every row tile (the attention's q0 - k0 and k0 - q0).
void check_small_gemm_bands(SmallGemm small_gemm_f32);

TEST(SmallGemmF32, BandsSkipOnlyWhatIsNotNeeded) {
  if (!tandem::kernels::avx512::has_f32()) GTEST_SKIP() << "no AVX-512 on this CPU";
  check_small_gemm_bands(&tandem::kernels::avx512::small_gemm_f32);
}

TEST(SmallGemmF32, Avx2BandsSkipOnlyWhatIsNotNeeded) {
  if (!tandem::kernels::avx2::has_f32()) GTEST_SKIP() << "no AVX2/FMA on this CPU, or TANDEM_CPU_ISA=generic";
  check_small_gemm_bands(&tandem::kernels::avx2::small_gemm_f32);
}

void check_small_gemm_bands(SmallGemm small_gemm_f32) {
  using Band = tandem::kernels::SmallGemmBand;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (Band::Kind kind : {Band::Kind::cols, Band::Kind::k_end, Band::Kind::k_begin})
    for (int64_t m : {1, 7, 32, 45})
      for (int64_t n : {8, 17, 32, 70})
        for (int64_t k : {1, 32, 64})
          for (int64_t shift : {-50, -9, -1, 0, 5, 31, 80})
            for (bool accumulate : {false, true}) {
              SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind) << " m " << m << " n " << n
                                                << " k " << k << " shift " << shift << " accumulate " << accumulate);
              const int64_t lda = k + 3, ldb = n + 5, ldc = n + 7;
              std::vector<float> a(static_cast<size_t>(m * lda)), b(static_cast<size_t>(k * ldb));
              std::vector<float> c(static_cast<size_t>(m * ldc + 1));
              for (float& x : a) x = u(rng);
              for (float& x : b) x = u(rng);
              for (float& x : c) x = u(rng);
              for (int64_t i = 0; i < m; ++i)
                for (int64_t p = 0; p < k; ++p) {
                  const bool outside = (kind == Band::Kind::k_end && p > i + shift) ||
                                       (kind == Band::Kind::k_begin && p < i + shift);
                  if (outside) a[static_cast<size_t>(i * lda + p)] = 0.0f;
                }
              std::vector<float> whole = c, banded = c;
              small_gemm_f32(m, n, k, 0.75f, a.data(), lda, 1, b.data(), ldb, whole.data(), ldc, accumulate, {});
              small_gemm_f32(m, n, k, 0.75f, a.data(), lda, 1, b.data(), ldb, banded.data(), ldc, accumulate,
                             {kind, shift});
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < ldc; ++j) {
                  const size_t at = static_cast<size_t>(i * ldc + j);
                  if (j >= n)
                    ASSERT_EQ(banded[at], c[at]) << "wrote padding at " << i << ", " << j;
                  else if (kind != Band::Kind::cols || j <= i + shift)
                    ASSERT_EQ(banded[at], whole[at]) << "at " << i << ", " << j;
                  else  // past a cols band: untouched or the product's value
                    ASSERT_TRUE(banded[at] == c[at] || banded[at] == whole[at]) << "at " << i << ", " << j;
                }
              ASSERT_EQ(banded.back(), c.back());
            }
}

// transpose_f32 (the attention's keys and values, [t, d] -> [d, t]): every tail of the 16 x 16
// blocks in both dimensions, padded strides on both sides; out's padding is never written.
using Transpose = void (*)(const float*, int64_t, int64_t, int64_t, float*, int64_t);
void check_transpose(Transpose transpose_f32);

TEST(TransposeF32, EveryBlockTailAndNothingOutsideWritten) {
  if (!tandem::kernels::avx512::has_f32()) GTEST_SKIP() << "no AVX-512 on this CPU";
  check_transpose(&tandem::kernels::avx512::transpose_f32);
}

TEST(TransposeF32, Avx2EveryBlockTailAndNothingOutsideWritten) {
  if (!tandem::kernels::avx2::has_f32()) GTEST_SKIP() << "no AVX2/FMA on this CPU, or TANDEM_CPU_ISA=generic";
  check_transpose(&tandem::kernels::avx2::transpose_f32);
}

void check_transpose(Transpose transpose_f32) {
  for (int64_t rows : {1, 2, 15, 16, 17, 33, 128, 130})
    for (int64_t cols : {1, 7, 16, 31, 32, 64, 100, 128}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols);
      const int64_t ld_x = cols + 3, ld_out = rows + 5;
      std::vector<float> x(static_cast<size_t>(rows * ld_x)), out(static_cast<size_t>(cols * ld_out + 1), -7.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
      transpose_f32(x.data(), rows, cols, ld_x, out.data(), ld_out);
      for (int64_t p = 0; p < cols; ++p)
        for (int64_t j = 0; j < ld_out; ++j) {
          const float got = out[static_cast<size_t>(p * ld_out + j)];
          if (j < rows)
            ASSERT_EQ(got, x[static_cast<size_t>(j * ld_x + p)]) << "at " << p << ", " << j;
          else
            ASSERT_EQ(got, -7.0f) << "wrote padding at " << p << ", " << j;
        }
      ASSERT_EQ(out.back(), -7.0f);
    }
}

}  // namespace
