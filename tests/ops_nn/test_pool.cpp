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
