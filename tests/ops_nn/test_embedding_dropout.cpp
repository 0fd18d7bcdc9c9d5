// embedding (gather, deterministic scatter-add backward) and dropout (one Philox draw, replayable).
#include <gtest/gtest.h>

#include "kernels/common/philox.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(Embedding, MatchesTorchWithRepeatedIndices) {
  for (DType it : {DType::i64, DType::i32}) {
    Tensor idx = ref(r::emb_idx, {2, 3}, it);
    Tensor w = ref(r::emb_w, {6, 4}, DType::f32, true);
    Tensor y = ops::embedding(idx, w);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    expect_close(y, r::emb_y, 1e-7, 1e-7);  // f32 rows of the f64 reference
    expect_close(grads_of(y, {w}, r::emb_r)[0], r::emb_gw, 1e-6, 1e-6);
  }
}

TEST(Embedding, Gradcheck) {
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 0, 2, 2, 1}, {5});
  Tensor w = random_leaf({4, 3}, 41);
  expect_gradcheck([&](const std::vector<Tensor>& t) { return ops::embedding(idx, t[0]); }, {w});
}

TEST(Embedding, Errors) {
  Tensor w = Tensor::zeros({4, 3});
  expect_value_error([&] { ops::embedding(Tensor::from_vector(std::vector<int64_t>{1, 4}, {2}), w); },
                     {"index 4", "4 rows"});
  expect_value_error([&] { ops::embedding(Tensor::zeros({2}), w); }, {"i32 or i64"});
  expect_value_error([&] { ops::embedding(Tensor::zeros({2}, DType::i64), Tensor::zeros({4})); }, {"[V, D]"});
}

TEST(Dropout, MaskFromOnePhiloxDrawAndScaledSurvivors) {
  Generator gen(77);
  const double p = 0.3;
  const int64_t n = 10001;  // not a multiple of 4: the last Philox block is partial
  Tensor x = Tensor::full({n}, 2.0, DType::f32);
  x.set_requires_grad(true);
  Tensor y = ops::dropout(x, p, true, gen);
  EXPECT_EQ(gen.offset(), 1u);
  std::vector<float> yv = y.to_vector<float>();
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox_uniform(77, 0, static_cast<uint64_t>(i)) >= static_cast<float>(p);
    ASSERT_FLOAT_EQ(yv[static_cast<size_t>(i)], keep ? 2.0f / 0.7f : 0.0f) << i;
    kept += keep;
  }
  EXPECT_NEAR(double(kept) / n, 1 - p, 0.02);
  // Backward applies the same mask and scale.
  Tensor gx = grad({y}, {x}, {Tensor::ones({n})})[0];
  std::vector<float> gv = gx.to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_FLOAT_EQ(gv[static_cast<size_t>(i)], yv[static_cast<size_t>(i)] / 2.0f) << i;
}

TEST(Dropout, ReplayWithSameStateReproducesAndNextDrawDiffers) {
  Generator gen(5);
  Tensor x = random_leaf({64}, 3);
  gen.set_state(5, 9);
  std::vector<double> a = ops::dropout(x, 0.5, true, gen).to_vector<double>();
  std::vector<double> c = ops::dropout(x, 0.5, true, gen).to_vector<double>();
  gen.set_state(5, 9);
  std::vector<double> b = ops::dropout(x, 0.5, true, gen).to_vector<double>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Dropout, EvalIdentityEdgesAndGradcheck) {
  Tensor x = random_leaf({3, 5}, 51);
  EXPECT_TRUE(ops::dropout(x, 0.5, false).is_same(x));
  Generator gen(1);
  for (double v : ops::dropout(x, 1.0, true, gen).to_vector<double>()) EXPECT_EQ(v, 0.0);
  expect_close(ops::dropout(x, 0.0, true, gen), x, 0, 0);
  // Each call draws a fresh mask, so the gradcheck replays a fixed generator state per call.
  expect_gradcheck([](const std::vector<Tensor>& t) {
    Generator g(3);
    return ops::dropout(t[0], 0.4, true, g);
  }, {x});
  Tensor h = Tensor::full({8}, 1.0, DType::f16);
  Generator g2(2);
  EXPECT_EQ(ops::dropout(h, 0.5, true, g2).dtype(), DType::f16);
  expect_value_error([&] { ops::dropout(x, 1.5, true, gen); }, {"[0, 1]"});
}

}  // namespace tandem::testing
