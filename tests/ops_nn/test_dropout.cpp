// dropout: the mask from one Philox draw, scaled survivors, replay from a generator state, eval
// identity, p = 0 and 1, gradcheck, 16-bit input, errors.
#include <gtest/gtest.h>

#include "runtime/backend/common/philox.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {

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
