// bf16 causal attention on the CPU where the bf16 GEMM runs on AMX tiles (kernels/cpu/attention_bf16.cpp):
// outputs and gradients against the f64 kernel on the same bf16 values, for T around the 128-query
// block, head widths 32/64/128, contiguous and token-major heads; the widened f32 path
// (TANDEM_CPU_GEMM=avx512) against the same bound; future keys and values changing no earlier row, bit
// for bit. Skipped on a CPU without AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/attention_bf16.h"
#include "runtime/ops.h"
#include "tests/support/cpu_gemm_path.h"

namespace tandem::testing {
namespace {


// f64 values that are exactly bf16.
Tensor bf16_values(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return ops::cast(ops::cast(rand_uniform(shape, -1.0, 1.0, gen, DType::f64), DType::bf16), DType::f64);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// max |got - want| <= tol * max |want| (bf16 outputs: a few of bf16's 2^-8 relative steps).
void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  const std::vector<double> g = ops::cast(got, DType::f64).to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << what << " at " << i;
    err = std::max(err, std::abs(g[i] - w[i]));
  }
  EXPECT_LE(err, tol * max_abs(w)) << what << ": max error " << err << " against max " << max_abs(w);
}

struct Result {
  Tensor out, dq, dk, dv;
};

// causal_attention on (q, k, v) in dtype, and the gradients of sum(out * r).
Result run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, DType dtype) {
  Tensor qd = ops::cast(q, dtype).detach(), kd = ops::cast(k, dtype).detach(), vd = ops::cast(v, dtype).detach();
  for (Tensor* x : {&qd, &kd, &vd}) x->set_requires_grad(true);
  Tensor out = ops::causal_attention(qd, kd, vd);
  auto g = grad({out}, {qd, kd, vd}, {ops::cast(r, dtype)});
  return {out, g[0], g[1], g[2]};
}

void check_against_f64(const Shape& s, uint64_t seed) {
  const Tensor q = bf16_values(s, seed), k = bf16_values(s, seed + 1), v = bf16_values(s, seed + 2);
  const Tensor r = bf16_values(s, seed + 3);
  const Result want = run(q, k, v, r, DType::f64), got = run(q, k, v, r, DType::bf16);
  SCOPED_TRACE("t=" + std::to_string(s[2]) + " d=" + std::to_string(s[3]));
  expect_close(got.out, want.out, 8e-3, "out");
  expect_close(got.dq, want.dq, 1.2e-2, "dq");
  expect_close(got.dk, want.dk, 1.2e-2, "dk");
  expect_close(got.dv, want.dv, 1.2e-2, "dv");
}

// T around the 128-query block (and over two), D 32 / 64 / 128.
const Shape kShapes[] = {{2, 2, 1, 32}, {1, 2, 63, 64},  {2, 1, 127, 64}, {1, 3, 128, 32},
                         {1, 2, 129, 64}, {1, 2, 130, 128}, {1, 1, 260, 64}};

TEST(Bf16AttentionOnTiles, MatchesF64OnTheSameValues) {
  if (!kernels::attention_bf16_on_tiles()) GTEST_SKIP() << "the bf16 GEMM does not run on AMX tiles here";
  uint64_t seed = 10;
  for (const Shape& s : kShapes) {
    check_against_f64(s, seed += 4);
    if (HasFailure()) return;
  }
}

// The same bound holds for the widened f32 kernels (the path without AMX): both are bf16-accurate.
TEST(Bf16AttentionOnTiles, WidenedPathMeetsTheSameBound) {
  CpuGemmPath avx512("avx512");
  ASSERT_FALSE(kernels::attention_bf16_on_tiles());
  check_against_f64({1, 2, 65, 32}, 50);
  check_against_f64({1, 1, 130, 64}, 54);
}

// Token-major heads (causal_self_attention reads q, k, v from one [B, T, 3C] tensor): the same values
// and gradients as split heads through causal_attention, bit for bit.
TEST(Bf16AttentionOnTiles, TokenMajorHeadsEqualSplitHeads) {
  if (!kernels::attention_bf16_on_tiles()) GTEST_SKIP() << "the bf16 GEMM does not run on AMX tiles here";
  const int64_t b = 2, t = 70, h = 2, d = 32;
  Generator gen(60);
  Tensor x = ops::cast(rand_uniform({b, t, 3 * h * d}, -1.0, 1.0, gen), DType::bf16).detach(), x2 = x.clone();
  x.set_requires_grad(true);
  x2.set_requires_grad(true);
  Tensor y = ops::causal_self_attention(x, h);
  auto qkv = ops::split_qkv(x2, h);
  Tensor y2 = ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
  EXPECT_EQ(y.to_vector<double>(), y2.to_vector<double>());
  Tensor r = ops::cast(rand_uniform({b, t, h * d}, -1.0, 1.0, gen), DType::bf16);
  ops::sum(ops::mul(y, r)).backward();
  ops::sum(ops::mul(y2, r)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), x2.grad().to_vector<double>());
}

// The last key and value made huge (finite: a masked probability is 0, and 0 * inf would be NaN in
// the product, as on the GPU's tensor cores) change no earlier output row or query gradient.
TEST(Bf16AttentionOnTiles, FutureKeysAndValuesChangeNoEarlierRow) {
  if (!kernels::attention_bf16_on_tiles()) GTEST_SKIP() << "the bf16 GEMM does not run on AMX tiles here";
  const Shape s{1, 2, 130, 64};  // the second query block (128, 129) holds the changed key
  const Tensor q = bf16_values(s, 70), k = bf16_values(s, 71), v = bf16_values(s, 72), r = bf16_values(s, 73);
  std::vector<double> kk = k.to_vector<double>(), vv = v.to_vector<double>();
  for (int64_t head = 0; head < s[1]; ++head)
    for (int64_t c = 0; c < s[3]; ++c) {
      const size_t i = static_cast<size_t>((head * s[2] + s[2] - 1) * s[3] + c);
      kk[i] = 3e4;
      vv[i] = -3e4;
    }
  const Result a = run(q, k, v, r, DType::bf16);
  const Result b = run(q, Tensor::from_vector(kk, s), Tensor::from_vector(vv, s), r, DType::bf16);
  const std::vector<double> ao = a.out.to_vector<double>(), bo = b.out.to_vector<double>();
  const std::vector<double> aq = a.dq.to_vector<double>(), bq = b.dq.to_vector<double>();
  size_t last_row_changed = 0;
  for (int64_t head = 0; head < s[1]; ++head)
    for (int64_t row = 0; row < s[2]; ++row)
      for (int64_t c = 0; c < s[3]; ++c) {
        const size_t i = static_cast<size_t>((head * s[2] + row) * s[3] + c);
        if (row == s[2] - 1) {
          last_row_changed += ao[i] != bo[i];
          continue;
        }
        ASSERT_TRUE(std::isfinite(bo[i]) && std::isfinite(bq[i])) << "row " << row << " column " << c;
        ASSERT_EQ(ao[i], bo[i]) << "out, head " << head << " row " << row << " column " << c;
        ASSERT_EQ(aq[i], bq[i]) << "dq, head " << head << " row " << row << " column " << c;
      }
  EXPECT_GT(last_row_changed, 0u) << "the last row sees the changed key: the check above is not vacuous";
}

}  // namespace
}  // namespace tandem::testing
