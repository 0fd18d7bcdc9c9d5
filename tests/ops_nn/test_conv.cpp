// conv2d: forward and gradients against PyTorch, finite-difference gradcheck in f64, im2col/col2im
// adjointness, 16-bit inputs, and the shape errors.
#include <gtest/gtest.h>

#include "runtime/backend/conv.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(Conv2d, ForwardAndGradsMatchTorchStride2) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
    Tensor x = ref(r::conv1_x, {2, 3, 7, 6}, dt, true), w = ref(r::conv1_w, {4, 3, 3, 2}, dt, true),
           b = ref(r::conv1_b, {4}, dt, true);
    Tensor y = ops::conv2d(x, w, b, {2, 1}, {1, 0});
    ASSERT_EQ(y.shape(), (Shape{2, 4, 4, 5}));
    expect_close(y, r::conv1_y, tol, tol);
    auto g = grads_of(y, {x, w, b}, r::conv1_r);
    expect_close(g[0], r::conv1_gx, tol, tol);
    expect_close(g[1], r::conv1_gw, tol, tol);
    expect_close(g[2], r::conv1_gb, tol, tol);
  }
}

TEST(Conv2d, ForwardAndGradsMatchTorchPadded) {
  Tensor x = ref(r::conv2_x, {1, 2, 5, 5}, DType::f32, true), w = ref(r::conv2_w, {3, 2, 3, 3}, DType::f32, true);
  Tensor y = ops::conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  expect_close(y, r::conv2_y, 1e-5, 1e-5);
  auto g = grads_of(y, {x, w}, r::conv2_r);
  expect_close(g[0], r::conv2_gx, 1e-5, 1e-5);
  expect_close(g[1], r::conv2_gw, 1e-5, 1e-5);
}

TEST(Conv2d, GradcheckStridePaddingOddSizes) {
  struct Case { Shape x, w; std::array<int64_t, 2> stride, pad; bool bias; };
  for (const Case& c : {Case{{2, 3, 5, 4}, {2, 3, 3, 3}, {2, 2}, {1, 1}, true},
                        Case{{1, 2, 6, 5}, {3, 2, 2, 3}, {1, 2}, {0, 1}, false},
                        Case{{2, 1, 4, 4}, {2, 1, 1, 1}, {1, 1}, {0, 0}, true}}) {
    Tensor x = random_leaf(c.x, 1), w = random_leaf(c.w, 2), b = c.bias ? random_leaf({c.w[0]}, 3) : Tensor();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    expect_gradcheck([&](const std::vector<Tensor>& t) {
      return ops::conv2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.pad);
    }, in);
  }
}

TEST(Conv2d, OnlyWeightNeedsGrad) {
  // The cnn's first layer: the input needs no gradient, so backward skips dX.
  Tensor x = random_leaf({2, 1, 5, 5}, 4).detach(), w = random_leaf({3, 1, 3, 3}, 5);
  expect_gradcheck([&](const std::vector<Tensor>& t) { return ops::conv2d(x, t[0], Tensor(), {1, 1}, {1, 1}); }, {w});
}

TEST(Conv2d, Im2colCol2imAreAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for every geometry: col2im is exactly the transpose of im2col.
  kernels::Conv2dGeometry g;
  g.n = 2; g.c = 3; g.h = 7; g.w = 6; g.o = 1; g.kh = 3; g.kw = 2; g.sh = 2; g.sw = 3; g.ph = 1; g.pw = 1;
  g.ho = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.wo = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  Generator gen(9);
  Tensor x = rand_uniform({g.n, g.c, g.h, g.w}, -1, 1, gen, DType::f64);
  Tensor c = rand_uniform({g.k(), g.n * g.l()}, -1, 1, gen, DType::f64);
  Tensor cols = Tensor::empty(c.shape(), DType::f64), xt = Tensor::empty(x.shape(), DType::f64);
  kernels::im2col(kCPU)(kCPU, DType::f64, g, x.data_ptr(), cols.data_ptr());
  kernels::col2im(kCPU)(kCPU, DType::f64, g, c.data_ptr(), xt.data_ptr());
  double lhs = 0, rhs = 0;
  auto cv = cols.to_vector<double>(), ccv = c.to_vector<double>(), xv = x.to_vector<double>(), xtv = xt.to_vector<double>();
  for (size_t i = 0; i < cv.size(); ++i) lhs += cv[i] * ccv[i];
  for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * xtv[i];
  EXPECT_NEAR(lhs, rhs, 1e-10);
}

TEST(Conv2d, HalfAndBfloat16ComputeViaF32) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = ref(r::conv1_x, {2, 3, 7, 6}, dt, true), w = ref(r::conv1_w, {4, 3, 3, 2}, dt, true),
           b = ref(r::conv1_b, {4}, dt, true);
    Tensor y = ops::conv2d(x, w, b, {2, 1}, {1, 0});
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, r::conv1_y, 0.06, 0.02);  // inputs rounded to 8 (bf16) / 11 (f16) bits
    auto g = grads_of(y, {x, w, b}, r::conv1_r);
    EXPECT_EQ(g[1].dtype(), dt);
    expect_close(g[1], r::conv1_gw, 0.1, 0.03);
  }
}

TEST(Conv2d, ErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({1, 3, 5, 5}), w = Tensor::zeros({2, 4, 3, 3});
  expect_value_error([&] { ops::conv2d(x, w); }, {"3 channels", "[1, 3, 5, 5]", "[2, 4, 3, 3]"});
  Tensor big = Tensor::zeros({2, 3, 7, 7});
  expect_value_error([&] { ops::conv2d(x, big); }, {"larger than the padded input", "[2, 3, 7, 7]", "[1, 3, 5, 5]"});
  EXPECT_NO_THROW(ops::conv2d(x, big, Tensor(), {1, 1}, {1, 1}));
  expect_value_error([&] { ops::conv2d(Tensor::zeros({3, 5, 5}), w); }, {"[N, C, H, W]", "[3, 5, 5]"});
  expect_value_error([&] { ops::conv2d(x, Tensor::zeros({2, 3, 3, 3}), Tensor::zeros({3})); }, {"bias", "[2]"});
  expect_value_error([&] { ops::conv2d(x, Tensor::zeros({2, 3, 3, 3}), Tensor(), {0, 1}); }, {"stride"});
}

}  // namespace tandem::testing
