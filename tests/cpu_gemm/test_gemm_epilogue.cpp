// The CPU GEMM's epilogues (bias, pre + GELU, a_row_sums, GELU's backward with c_col_sums; sums_add)
// in f32 against f64 references, at odd sizes and every transpose, on the kernel the ISA picks (the
// _avx2 run: our AVX2 kernel) and on Eigen's path; f16 and bf16 operands with a bias and GELU too.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "runtime/backend/common/half.h"
#include "runtime/backend/gemm.h"
#include "runtime/tensor.h"
#include "tests/support/cpu_gemm_path.h"

using namespace tandem;

namespace {

double gelu(double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }
double gelu_grad(double v) {
  const double t = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
  return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
}

enum class Epi { Bias, BiasGelu, Gelu, RowSums, RowSumsAdd, DGelu, DGeluColSums };

// T: the operands' storage (float, half, bfloat16); f64 references from the stored values.
template <class T>
void check(int64_t m, int64_t n, int64_t k, bool ta, bool tb, Epi e, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](int64_t count) {
    std::vector<T> v(static_cast<size_t>(count));
    for (T& x : v) x = T(u(rng));
    return v;
  };
  const std::vector<T> a = fill(m * k), b = fill(k * n), bias = fill(n), dpre = fill(m * n);
  std::vector<T> c(static_cast<size_t>(m * n), T(0.f)), pre(static_cast<size_t>(m * n), T(0.f));
  std::vector<float> sums(static_cast<size_t>(std::max(m, n)), 0.25f);  // sums_add adds to these
  kernels::GemmArgs g;
  g.dtype = dtype_v<T>;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m, g.n = n, g.k = k;
  g.a = a.data(), g.lda = ta ? m : k;
  g.b = b.data(), g.ldb = tb ? k : n;
  g.c = c.data(), g.ldc = n;
  const bool with_bias = e == Epi::Bias || e == Epi::BiasGelu, with_gelu = e == Epi::BiasGelu || e == Epi::Gelu;
  const bool row_sums = e == Epi::RowSums || e == Epi::RowSumsAdd, dgelu = e == Epi::DGelu || e == Epi::DGeluColSums;
  std::vector<T> sums_t(sums.size(), T(0.f));
  if (with_bias) g.bias = bias.data();
  if (with_gelu) g.gelu = true, g.pre = pre.data();
  if (row_sums) g.a_row_sums = e == Epi::RowSumsAdd ? static_cast<void*>(sums.data()) : sums_t.data();
  if (dgelu) g.dgelu_pre = dpre.data();
  if (e == Epi::DGeluColSums) g.c_col_sums = sums_t.data();
  g.sums_add = e == Epi::RowSumsAdd;
  kernels::gemm(kCPU)(kCPU, g);

  const double eps = std::is_same_v<T, float> ? std::ldexp(1.0, -21) : std::is_same_v<T, bfloat16> ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  auto av = [&](int64_t i, int64_t l) { return double(float(a[ta ? l * m + i : i * k + l])); };
  auto bv = [&](int64_t l, int64_t j) { return double(float(b[tb ? j * k + l : l * n + j])); };
  std::vector<double> col(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double row = 0, row_mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      double v = 0, mag = 0;
      for (int64_t l = 0; l < k; ++l) v += av(i, l) * bv(l, j), mag += std::abs(av(i, l) * bv(l, j));
      if (with_bias) v += float(bias[j]), mag += std::abs(float(bias[j]));
      const double tol = (k + 4) * eps * (mag + 1e-3);
      double want = v;
      if (with_gelu) {
        EXPECT_NEAR(float(pre[i * n + j]), v, tol) << "pre " << i << "," << j;
        want = gelu(v);
      }
      if (dgelu) want = v * gelu_grad(float(dpre[i * n + j]));
      col[j] += want;
      ASSERT_NEAR(float(c[i * n + j]), want, tol * 2) << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                                     << " tb=" << tb << " epilogue " << int(e) << " at " << i << "," << j;
    }
    if (row_sums) {
      for (int64_t l = 0; l < k; ++l) row += av(i, l), row_mag += std::abs(av(i, l));
      const double got = e == Epi::RowSumsAdd ? sums[i] - 0.25 : double(float(sums_t[i]));
      ASSERT_NEAR(got, row, (k + 4) * eps * (row_mag + 1)) << "a_row_sums " << i;
    }
  }
  if (e == Epi::DGeluColSums) {
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(float(sums_t[j]), col[j], (m + 4) * (k + 4) * eps * 4) << "c_col_sums " << j;
  }
}

void check_all(bool eigen) {
  std::unique_ptr<tandem::testing::CpuGemmPath> pin;
  if (eigen) pin = std::make_unique<tandem::testing::CpuGemmPath>("eigen");
  std::mt19937 rng(11);
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 17, 63}, {17, 7, 129}, {63, 129, 17}, {129, 63, 7}, {130, 33, 300}};
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t)
      for (Epi e : {Epi::Bias, Epi::BiasGelu, Epi::Gelu, Epi::RowSums, Epi::RowSumsAdd, Epi::DGelu, Epi::DGeluColSums}) {
        check<float>(s[0], s[1], s[2], t & 1, t & 2, e, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      check<half>(s[0], s[1], s[2], t & 1, t & 2, Epi::BiasGelu, rng);
      check<bfloat16>(s[0], s[1], s[2], t & 1, t & 2, Epi::BiasGelu, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

}  // namespace

TEST(CpuGemmEpilogue, MatchesF64Reference) { check_all(false); }
TEST(CpuGemmEpilogue, EigenPathMatchesF64Reference) { check_all(true); }
