// split_heads / merge_heads / split_qkv: values against index arithmetic, round trips, gradients.
#include <gtest/gtest.h>

#include <array>

#include "runtime/ops.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {

TEST(HeadLayout, SplitQkvMatchesIndexArithmetic) {
  const int64_t b = 2, t = 3, h = 2, d = 4, c = h * d;
  std::vector<double> x(static_cast<size_t>(b * t * 3 * c));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  auto qkv = ops::split_qkv(Tensor::from_vector(x, {b, t, 3 * c}, DType::f64), h);
  for (int part = 0; part < 3; ++part) {
    ASSERT_EQ(qkv[static_cast<size_t>(part)].shape(), (Shape{b, h, t, d}));
    std::vector<double> got = qkv[static_cast<size_t>(part)].to_vector<double>();
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t di = 0; di < d; ++di)
            ASSERT_EQ(got[static_cast<size_t>(((bi * h + hi) * t + ti) * d + di)],
                      x[static_cast<size_t>((bi * t + ti) * 3 * c + part * c + hi * d + di)]);
  }
}

TEST(HeadLayout, MergeInvertsSplit) {
  Tensor x = random_leaf({2, 5, 12}, 1);
  Tensor s = ops::split_heads(x, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 5, 4}));
  expect_close(ops::merge_heads(s), x, 0, 0);
}

TEST(HeadLayout, Gradcheck) {
  Tensor x = random_leaf({2, 3, 12}, 2);
  expect_gradcheck([](const std::vector<Tensor>& t) {
    auto qkv = ops::split_qkv(t[0], 2);
    return ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
  }, {x});
}

// split_qkv's one backward node: gradients reaching only some of q, k, v (the others are zero
// there), and each alone, against finite differences.
TEST(HeadLayout, SplitQkvGradcheckWithSomeOutputsUnused) {
  Tensor x = random_leaf({2, 3, 12}, 3);
  for (int used : {0, 1, 2})
    expect_gradcheck([used](const std::vector<Tensor>& t) {
      auto qkv = ops::split_qkv(t[0], 2);
      return ops::mul(qkv[static_cast<size_t>(used)], qkv[static_cast<size_t>(used)]);
    }, {x});
  expect_gradcheck([](const std::vector<Tensor>& t) {
    auto qkv = ops::split_qkv(t[0], 2);
    return ops::add(ops::mul(qkv[0], qkv[2]), qkv[2]);  // k unused
  }, {x});
}

// causal_self_attention: the composition's values and gradients, bit for bit (the same kernels on
// the same data), across the default tiles (T = 70) in f32 and f64, and its finite differences.
TEST(HeadLayout, SelfAttentionEqualsTheComposition) {
  for (DType dt : {DType::f32, DType::f64})
    for (auto [b, t, h, d] : std::vector<std::array<int64_t, 4>>{{2, 5, 2, 3}, {1, 70, 3, 8}}) {
      Tensor x = random_leaf({b, t, 3 * h * d}, 5), x2 = random_leaf({b, t, 3 * h * d}, 5);
      x = ops::cast(x.detach(), dt);
      x.set_requires_grad(true);
      x2 = ops::cast(x2.detach(), dt);
      x2.set_requires_grad(true);
      Tensor y = ops::causal_self_attention(x, h);
      auto qkv = ops::split_qkv(x2, h);
      Tensor y2 = ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
      ASSERT_EQ(y.shape(), (Shape{b, t, h * d}));
      EXPECT_EQ(y.to_vector<double>(), y2.to_vector<double>());
      Tensor r = random_leaf({b, t, h * d}, 6).detach();
      r = ops::cast(r, dt);
      ops::sum(ops::mul(y, r)).backward();
      ops::sum(ops::mul(y2, r)).backward();
      EXPECT_EQ(x.grad().to_vector<double>(), x2.grad().to_vector<double>()) << dtype_name(dt) << " t " << t;
    }
  Tensor x = random_leaf({2, 3, 12}, 7);
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::causal_self_attention(t[0], 2); }, {x});
  EXPECT_THROW(ops::causal_self_attention(Tensor::zeros({2, 3, 12}), 3), ValueError);
  EXPECT_THROW(ops::causal_self_attention(Tensor::zeros({2, 12}), 2), ValueError);
}

// bf16 and f16 inputs outside autocast (the CPU widens them): q, k and v are one tensor, so are dq, dk
// and dv, each widened or narrowed once; the composition's values and gradients bit for bit.
TEST(HeadLayout, SelfAttentionInSixteenBitEqualsTheComposition) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x = ops::cast(random_leaf({2, 19, 3 * 2 * 5}, 8).detach(), dt), x2 = x.clone();
    x.set_requires_grad(true);
    x2.set_requires_grad(true);
    Tensor y = ops::causal_self_attention(x, 2);
    auto qkv = ops::split_qkv(x2, 2);
    Tensor y2 = ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.to_vector<double>(), y2.to_vector<double>()) << dtype_name(dt);
    Tensor r = ops::cast(random_leaf({2, 19, 2 * 5}, 9).detach(), dt);
    ops::sum(ops::mul(y, r)).backward();
    ops::sum(ops::mul(y2, r)).backward();
    EXPECT_EQ(x.grad().to_vector<double>(), x2.grad().to_vector<double>()) << dtype_name(dt);
  }
}

TEST(HeadLayout, ShapeErrors) {
  EXPECT_THROW(ops::split_heads(Tensor::zeros({2, 3, 10}), 3), ValueError);
  EXPECT_THROW(ops::split_qkv(Tensor::zeros({2, 3, 12}), 3), ValueError);
  EXPECT_THROW(ops::merge_heads(Tensor::zeros({2, 3, 10})), ValueError);
}

}  // namespace
}  // namespace tandem::testing
