// small_gemm_f32 (the CPU attention's unpacked tile products) against an f64 reference: every row
// count of a register tile and several tiles, column tails on both 16-lane halves, empty K, A read
// row-major and transposed with padded strides, B and C with padded rows, overwrite and accumulate,
// alpha; nothing outside C's [m, n] written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/small_gemm_avx512.h"

namespace {

TEST(SmallGemmF32, MatchesTheF64ProductOverEveryTail) {
  if (!tandem::kernels::avx512::has_f32()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t m : {1, 2, 13, 14, 15, 29, 32, 45})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 64, 70})
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
            tandem::kernels::avx512::small_gemm_f32(m, n, k, alpha, a.data(), a_row, a_col, b.data(), ldb, c.data(),
                                                    ldc, accumulate);
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

}  // namespace
