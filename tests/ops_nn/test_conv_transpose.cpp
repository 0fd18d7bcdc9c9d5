// conv_transpose2d: forward and gradients against PyTorch (output_padding included), finite-difference
// gradcheck in f64, 16-bit inputs, and the errors.
#include <gtest/gtest.h>

#include "runtime/ops.h"
#include "runtime/ops/conv.h"
#include "tests/ops_nn/helpers.h"
#include "tests/reference/ops_resample_values.h"

namespace tandem::testing {
namespace r = ref::ops_resample;

TEST(ConvTranspose2d, ForwardAndGradsMatchTorchStride2OutputPadding) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
    Tensor x = ref(r::ct1_x, {2, 3, 4, 5}, dt, true), w = ref(r::ct1_w, {3, 4, 3, 3}, dt, true),
           b = ref(r::ct1_b, {4}, dt, true);
    Tensor y = ops::conv_transpose2d(x, w, b, {2, 2}, {1, 1}, {1, 1});
    ASSERT_EQ(y.shape(), (Shape{2, 4, 8, 10}));
    expect_close(y, r::ct1_y, tol, tol);
    auto g = grads_of(y, {x, w, b}, r::ct1_r);
    expect_close(g[0], r::ct1_gx, tol, tol);
    expect_close(g[1], r::ct1_gw, tol, tol);
    expect_close(g[2], r::ct1_gb, tol, tol);
  }
}

TEST(ConvTranspose2d, ForwardAndGradsMatchTorchMixedStrideNoBias) {
  Tensor x = ref(r::ct2_x, {1, 2, 3, 3}, DType::f32, true), w = ref(r::ct2_w, {2, 3, 2, 3}, DType::f32, true);
  Tensor y = ops::conv_transpose2d(x, w, Tensor(), {2, 1}, {0, 1}, {1, 0});
  ASSERT_EQ(y.shape(), (Shape{1, 3, 7, 3}));
  expect_close(y, r::ct2_y, 1e-5, 1e-5);
  auto g = grads_of(y, {x, w}, r::ct2_r);
  expect_close(g[0], r::ct2_gx, 1e-5, 1e-5);
  expect_close(g[1], r::ct2_gw, 1e-5, 1e-5);
}

TEST(ConvTranspose2d, GradcheckStridePaddingOutputPadding) {
  struct Case { Shape x, w; std::array<int64_t, 2> stride, pad, out_pad; bool bias; };
  for (const Case& c : {Case{{2, 3, 3, 4}, {3, 2, 3, 3}, {2, 2}, {1, 1}, {1, 0}, true},
                        Case{{1, 2, 4, 3}, {2, 3, 2, 2}, {2, 2}, {0, 0}, {0, 0}, false},
                        Case{{2, 2, 3, 3}, {2, 2, 3, 2}, {1, 3}, {1, 0}, {0, 2}, true},
                        Case{{1, 1, 2, 2}, {1, 2, 1, 1}, {1, 1}, {0, 0}, {0, 0}, true}}) {
    Tensor x = random_leaf(c.x, 11), w = random_leaf(c.w, 12), b = c.bias ? random_leaf({c.w[1]}, 13) : Tensor();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    expect_gradcheck([&](const std::vector<Tensor>& t) {
      return ops::conv_transpose2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.pad, c.out_pad);
    }, in);
  }
}

TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  // <conv_transpose2d(x, w), z> == <x, conv2d(z, w)>: the same weight, stride and padding.
  Tensor x = random_leaf({2, 3, 4, 5}, 21).detach(), w = random_leaf({3, 2, 3, 3}, 22).detach();
  Tensor y = ops::conv_transpose2d(x, w, Tensor(), {2, 2}, {1, 1}, {1, 0});
  Tensor z = random_leaf(y.shape(), 23).detach();
  Tensor cz = ops::conv2d(z, w, Tensor(), {2, 2}, {1, 1});
  ASSERT_EQ(cz.shape(), x.shape());
  EXPECT_NEAR(ops::sum(ops::mul(y, z)).item(), ops::sum(ops::mul(x, cz)).item(), 1e-10);
}

TEST(ConvTranspose2d, HalfAndBfloat16ComputeViaF32) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = ref(r::ct1_x, {2, 3, 4, 5}, dt, true), w = ref(r::ct1_w, {3, 4, 3, 3}, dt, true),
           b = ref(r::ct1_b, {4}, dt, true);
    Tensor y = ops::conv_transpose2d(x, w, b, {2, 2}, {1, 1}, {1, 1});
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, r::ct1_y, 0.06, 0.02);
    auto g = grads_of(y, {x, w, b}, r::ct1_r);
    EXPECT_EQ(g[1].dtype(), dt);
    expect_close(g[1], r::ct1_gw, 0.1, 0.03);
  }
}

TEST(ConvTranspose2d, ErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({1, 3, 5, 5}), w = Tensor::zeros({4, 2, 3, 3});
  expect_value_error([&] { ops::conv_transpose2d(x, w); }, {"3 channels", "[1, 3, 5, 5]", "[4, 2, 3, 3]"});
  Tensor w3 = Tensor::zeros({3, 2, 3, 3});
  expect_value_error([&] { ops::conv_transpose2d(x, w3, Tensor(), {2, 2}, {0, 0}, {2, 0}); },
                     {"output_padding [2, 0]", "smaller than the stride"});
  expect_value_error([&] { ops::conv_transpose2d(x, w3, Tensor::zeros({3})); }, {"bias", "[2]"});
  expect_value_error([&] { ops::conv_transpose2d(Tensor::zeros({1, 3, 1, 1}), w3, Tensor(), {1, 1}, {2, 2}); },
                     {"empty output"});
}

}  // namespace tandem::testing
