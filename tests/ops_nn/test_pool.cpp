// max_pool2d / avg_pool2d: forward and gradients against PyTorch, gradcheck, NaN propagation,
// 16-bit inputs, errors.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(Pool2d, MatchTorch) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    Tensor x = ref(r::pool_x, {2, 2, 7, 5}, dt, true);
    Tensor y = ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    ASSERT_EQ(y.shape(), (Shape{2, 2, 4, 3}));
    expect_close(y, r::maxpool_y, tol, tol);
    expect_close(grads_of(y, {x}, r::maxpool_r)[0], r::maxpool_gx, tol, tol);
    y = ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    expect_close(y, r::avgpool_y, tol, tol);
    expect_close(grads_of(y, {x}, r::avgpool_r)[0], r::avgpool_gx, tol, tol);
    y = ops::max_pool2d(x, {2, 2});  // stride defaults to the kernel; the odd last row/column is dropped
    ASSERT_EQ(y.shape(), (Shape{2, 2, 3, 2}));
    expect_close(y, r::maxpool2_y, tol, tol);
    expect_close(grads_of(y, {x}, r::maxpool2_r)[0], r::maxpool2_gx, tol, tol);
  }
}

TEST(Pool2d, Gradcheck) {
  Tensor x = random_leaf({2, 3, 7, 6}, 11);
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], {3, 2}, {2, 1}, {1, 1}); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], {3, 2}, {2, 1}, {1, 1}); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], {2, 2}); }, {x});
}

TEST(Pool2d, MaxPropagatesNaN) {
  std::vector<double> v(16, 1.0);
  v[5] = std::numeric_limits<double>::quiet_NaN();
  Tensor y = ops::max_pool2d(Tensor::from_vector(v, {1, 1, 4, 4}, DType::f32), {2, 2});
  std::vector<float> out = y.to_vector<float>();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 1.0f);
}

// The cnn's 2x2 / stride 2 pool on f32 runs vector rows (AVX-512, AVX2 in the _avx2 run, or the
// compiler's loop): rows of 8 and 16 outputs and tails, ties (the first of the window in the order
// (0,0), (0,1), (1,0), (1,1) takes the gradient), a NaN in a window (it wins), odd widths and heights,
// against the rule written out here.
TEST(Pool2d, Max2x2WideRowsMatchTheScalarRule) {
  // Rows of 1 to 7 outputs (the AVX2 rows' short-row stores: whole vectors into the plane's later rows,
  // element by element at its end), 8 and more (a last step overlapping the one before it), several
  // planes (a store past a plane's end would overwrite the next one's first values).
  for (int64_t w : {2, 4, 6, 7, 8, 9, 14, 15, 16, 17, 28, 32, 37, 50})
    for (int64_t h : {2, 5, 14}) {
      std::vector<double> v(static_cast<size_t>(2 * h * w)), up;
      for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 7919) % 13) - 6;  // many ties
      v[3] = std::numeric_limits<double>::quiet_NaN();
      Tensor x = Tensor::from_vector(v, {1, 2, h, w}, DType::f32);
      x.set_requires_grad(true);
      Tensor y = ops::max_pool2d(x, {2, 2});
      const int64_t ho = h / 2, wo = w / 2;
      for (int64_t i = 0; i < 2 * ho * wo; ++i) up.push_back(1.0 + double(i));
      const std::vector<double> gx = grad({y}, {x}, {Tensor::from_vector(up, y.shape(), DType::f32)})[0].to_vector<double>();
      const std::vector<double> out = y.to_vector<double>();
      std::vector<double> want_gx(v.size(), 0.0);
      for (int64_t p = 0; p < 2; ++p)
        for (int64_t oy = 0; oy < ho; ++oy)
          for (int64_t ox = 0; ox < wo; ++ox) {
            size_t best = static_cast<size_t>((p * h + 2 * oy) * w + 2 * ox);
            for (size_t at : {best + 1, best + size_t(w), best + size_t(w) + 1})
              if (v[at] > v[best] || std::isnan(v[at])) best = at;
            const size_t q = static_cast<size_t>((p * ho + oy) * wo + ox);
            if (std::isnan(v[best])) {
              ASSERT_TRUE(std::isnan(out[q])) << "w=" << w << " at " << q;
            } else {
              ASSERT_EQ(out[q], v[best]) << "w=" << w << " h=" << h << " at " << q;
            }
            want_gx[best] += up[q];
          }
      for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(gx[i], want_gx[i]) << "w=" << w << " h=" << h << " dx at " << i;
    }
}

TEST(Pool2d, HalfAndBfloat16) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = ref(r::pool_x, {2, 2, 7, 5}, dt, true);
    Tensor y = ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, r::maxpool_y, 1e-2, 1e-2);
    expect_close(grads_of(y, {x}, r::maxpool_r)[0], r::maxpool_gx, 1e-2, 1e-2);
    y = ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    expect_close(y, r::avgpool_y, 1e-2, 1e-2);
  }
}

TEST(Pool2d, Errors) {
  Tensor x = Tensor::zeros({1, 1, 4, 4});
  expect_value_error([&] { ops::max_pool2d(x, {2, 2}, {2, 2}, {2, 0}); }, {"padding", "half of the kernel"});
  expect_value_error([&] { ops::avg_pool2d(x, {5, 5}); }, {"larger than the padded input", "[1, 1, 4, 4]"});
  expect_value_error([&] { ops::max_pool2d(Tensor::zeros({4, 4}), {2, 2}); }, {"[N, C, H, W]", "[4, 4]"});
  expect_value_error([&] { ops::max_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i32), {2, 2}); }, {"floating"});
}

}  // namespace tandem::testing
