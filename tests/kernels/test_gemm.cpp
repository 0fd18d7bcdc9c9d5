// The CPU GEMM against a naive triple loop: every transpose combination, strides, batches, beta,
// empty sizes and the 16-bit types.
#include <gtest/gtest.h>

#include "runtime/backend/gemm.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {
struct Case {
  bool ta, tb;
  int64_t m, n, k, batch;
  double alpha, beta;
};

void check(const Case& cs, DType dtype, double tol) {
  Generator gen(42);
  int64_t lda = (cs.ta ? cs.m : cs.k) + 2, ldb = (cs.tb ? cs.k : cs.n) + 1, ldc = cs.n + 3;
  int64_t a_rows = cs.ta ? cs.k : cs.m, b_rows = cs.tb ? cs.n : cs.k;
  int64_t sa = a_rows * lda, sb = b_rows * ldb, sc = cs.m * ldc;
  Tensor A = rand_uniform({cs.batch * sa}, -1, 1, gen, dtype);
  Tensor B = rand_uniform({cs.batch * sb}, -1, 1, gen, dtype);
  Tensor C = rand_uniform({cs.batch * sc}, -1, 1, gen, dtype);
  auto a = A.to_vector<double>(), b = B.to_vector<double>(), c0 = C.to_vector<double>();
  kernels::GemmArgs g;
  g.dtype = dtype;
  g.trans_a = cs.ta;
  g.trans_b = cs.tb;
  g.m = cs.m; g.n = cs.n; g.k = cs.k;
  g.a = A.data_ptr(); g.lda = lda;
  g.b = B.data_ptr(); g.ldb = ldb;
  g.c = C.data_ptr(); g.ldc = ldc;
  g.alpha = cs.alpha; g.beta = cs.beta;
  g.batch = cs.batch; g.stride_a = sa; g.stride_b = sb; g.stride_c = sc;
  kernels::gemm(kCPU)(kCPU, g);
  auto c = C.to_vector<double>();
  for (int64_t p = 0; p < cs.batch; ++p)
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < cs.k; ++l) {
          double av = cs.ta ? a[p * sa + l * lda + i] : a[p * sa + i * lda + l];
          double bv = cs.tb ? b[p * sb + j * ldb + l] : b[p * sb + l * ldb + j];
          acc += av * bv;
        }
        size_t at = static_cast<size_t>(p * sc + i * ldc + j);
        double want = cs.alpha * acc + (cs.beta == 0 ? 0 : cs.beta * c0[at]);
        ASSERT_NEAR(c[at], want, tol * (1 + std::abs(want))) << "batch " << p << " (" << i << "," << j << ")";
      }
}
}  // namespace

TEST(Gemm, MatchesNaiveAllLayouts) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check({ta, tb, 5, 7, 3, 1, 1.0, 0.0}, DType::f32, 1e-5);
      check({ta, tb, 17, 9, 33, 3, 0.5, 1.0}, DType::f64, 1e-12);
      check({ta, tb, 4, 6, 8, 2, 2.0, -0.5}, DType::f32, 1e-5);
    }
}

TEST(Gemm, LowPrecisionAccumulatesInF32) {
  check({false, true, 6, 5, 40, 2, 1.0, 0.0}, DType::f16, 1e-2);
  check({true, false, 6, 5, 40, 1, 1.0, 1.0}, DType::bf16, 3e-2);
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  check({false, false, 3, 4, 0, 1, 1.0, 0.0}, DType::f32, 0);
  check({false, false, 3, 4, 0, 1, 1.0, 2.0}, DType::f32, 1e-6);
  check({false, false, 0, 4, 3, 1, 1.0, 0.0}, DType::f32, 0);
}
