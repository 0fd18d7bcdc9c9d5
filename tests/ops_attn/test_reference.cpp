// causal_attention and cross_entropy at GPT-2's vocabulary against PyTorch 1.13's values
// (tests/reference/attention_reference.py: attention written out with a mask, float64).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/ops.h"
#include "tests/reference/attention_values.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {
namespace r = ref::attention;

Tensor from(const std::vector<double>& v, const Shape& s, DType dt, bool rg = false) {
  Tensor t = Tensor::from_vector(v, s, dt);
  if (rg) t.set_requires_grad(true);
  return t;
}

TEST(AttentionReference, ForwardAndGradsMatchTorch) {
  const Shape s{2, 3, 7, 8};
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
    Tensor q = from(r::attn_q, s, dt, true), k = from(r::attn_k, s, dt, true), v = from(r::attn_v, s, dt, true);
    Tensor y = ops::causal_attention(q, k, v);
    expect_close(y, r::attn_y, tol, tol);
    auto g = grad({y}, {q, k, v}, {from(r::attn_r, s, dt)});
    expect_close(g[0], r::attn_gq, tol, tol);
    expect_close(g[1], r::attn_gk, tol, tol);
    expect_close(g[2], r::attn_gv, tol, tol);
  }
}

// logits[i, c] = 4 sin(0.37 i + 0.0113 c) + 2 cos(0.0007 c (i + 1)); targets (7919 i + 13) mod 50257,
// row 4 ignored (-100); as in the script.
void check_cross_entropy(int64_t vocab, DType dt, const std::vector<double>& per_row, double mean,
                         const std::vector<double>& g_targets, const std::vector<double>& g_cols,
                         const std::vector<double>& g_abs) {
  const int64_t n = 6;
  std::vector<double> lv(static_cast<size_t>(n * vocab));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < vocab; ++c)
      lv[static_cast<size_t>(i * vocab + c)] = 4 * std::sin(0.37 * double(i) + 0.0113 * double(c)) +
                                               2 * std::cos(0.0007 * double(c) * double(i + 1));
  std::vector<int64_t> tv(n);
  for (int64_t i = 0; i < n; ++i) tv[static_cast<size_t>(i)] = (7919 * i + 13) % 50257;
  tv[4] = -100;
  Tensor logits = from(lv, {n, vocab}, dt, true);
  Tensor target = Tensor::from_vector(tv, {n});
  // f32: the logsumexp of ~15 carries ~1e-6 absolute error, so p = exp(x - lse) ~1e-5 relative.
  const double atol = dt == DType::f64 ? 1e-13 : 1e-8, rtol = dt == DType::f64 ? 1e-10 : 5e-5;
  auto tol = [&](double want) { return atol + rtol * std::abs(want); };
  expect_close(ops::cross_entropy(logits, target, -100, ops::Reduction::None), per_row, atol, rtol);
  Tensor loss = ops::cross_entropy(logits, target, -100, ops::Reduction::Mean);
  EXPECT_NEAR(loss.item(), mean, tol(mean));
  std::vector<double> g = grad({loss}, {logits})[0].to_vector<double>();
  const int64_t cols[6] = {0, 1, 777, 50255, 50256, vocab - 1};
  for (int64_t i = 0; i < n; ++i) {
    const double* row = g.data() + i * vocab;
    const double gt = g_targets[static_cast<size_t>(i)];
    EXPECT_NEAR(row[std::max<int64_t>(tv[static_cast<size_t>(i)], 0)], gt, tol(gt)) << i;
    for (int j = 0; j < 6; ++j) {
      const double want = g_cols[static_cast<size_t>(i * 6 + j)];
      EXPECT_NEAR(row[cols[j]], want, tol(want)) << i << " " << j;
    }
    double a = 0;
    for (int64_t c = 0; c < vocab; ++c) a += std::abs(row[c]);
    EXPECT_NEAR(a, g_abs[static_cast<size_t>(i)], tol(g_abs[static_cast<size_t>(i)])) << i;
  }
}

TEST(AttentionReference, CrossEntropyAtGpt2Vocab) {
  for (DType dt : {DType::f64, DType::f32}) {
    check_cross_entropy(50257, dt, r::ce50257_per_row, r::ce50257_mean[0], r::ce50257_grad_at_targets,
                        r::ce50257_grad_cols, r::ce50257_grad_abs_sum);
    check_cross_entropy(50304, dt, r::ce50304_per_row, r::ce50304_mean[0], r::ce50304_grad_at_targets,
                        r::ce50304_grad_cols, r::ce50304_grad_abs_sum);
  }
}

// Wide rows take the vectorised path: a -inf logit (a masked class) still gets exactly 0 gradient,
// and the loss equals the narrow path's formula.
TEST(AttentionReference, CrossEntropyWideRowWithMinusInf) {
  const int64_t c = 3000;
  std::vector<double> lv(static_cast<size_t>(2 * c));
  for (int64_t i = 0; i < 2 * c; ++i) lv[static_cast<size_t>(i)] = std::sin(0.01 * double(i)) * 3;
  for (int64_t j = 100; j < 200; ++j) lv[static_cast<size_t>(c + j)] = -std::numeric_limits<double>::infinity();
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor logits = from(lv, {2, c}, dt, true);
    Tensor target = Tensor::from_vector(std::vector<int64_t>{5, 7}, {2});
    Tensor loss = ops::cross_entropy(logits, target, -100, ops::Reduction::Sum);
    double want = 0;
    for (int64_t r = 0; r < 2; ++r) {
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < c; ++j) m = std::max(m, lv[static_cast<size_t>(r * c + j)]);
      for (int64_t j = 0; j < c; ++j) sum += std::exp(lv[static_cast<size_t>(r * c + j)] - m);
      want += m + std::log(sum) - lv[static_cast<size_t>(r * c + (r == 0 ? 5 : 7))];
    }
    EXPECT_NEAR(loss.item(), want, 1e-5 * std::abs(want));
    std::vector<double> g = grad({loss}, {logits})[0].to_vector<double>();
    for (int64_t j = 100; j < 200; ++j) EXPECT_EQ(g[static_cast<size_t>(c + j)], 0.0) << j;
    EXPECT_GT(std::abs(g[static_cast<size_t>(c + 99)]), 0.0);
  }
}

}  // namespace
}  // namespace tandem::testing
