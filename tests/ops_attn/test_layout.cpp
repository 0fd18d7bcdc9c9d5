// split_heads / merge_heads / split_qkv: values against index arithmetic, round trips, gradients.
#include <gtest/gtest.h>

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

TEST(HeadLayout, ShapeErrors) {
  EXPECT_THROW(ops::split_heads(Tensor::zeros({2, 3, 10}), 3), ValueError);
  EXPECT_THROW(ops::split_qkv(Tensor::zeros({2, 3, 12}), 3), ValueError);
  EXPECT_THROW(ops::merge_heads(Tensor::zeros({2, 3, 10})), ValueError);
}

}  // namespace
}  // namespace tandem::testing
