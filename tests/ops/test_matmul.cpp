// matmul, linear, linear_gelu and mlp_gelu: forward (and gradients) against PyTorch values or the
// ops they fuse, f64 gradchecks, empty dims, error messages; linear under bf16 autocast.
#include "runtime/autocast.h"
#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

TEST(Matmul, MatchesTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    Tensor a = ref_tensor(R::mm_a, {2, 3, 4}, dt), b = ref_tensor(R::mm_b, {2, 4, 5}, dt);
    Tensor w = ref_tensor(R::mm_w, {4, 5}, dt);
    Tensor a0 = ops::slice0(a, 0, 1).view({3, 4});
    expect_close(ops::matmul(a0, w), R::mm_2d, tol, tol);
    Tensor bmm = ops::matmul(a, b);
    EXPECT_EQ(bmm.shape(), (Shape{2, 3, 5}));
    expect_close(bmm, R::mm_bmm, tol, tol);
    expect_close(ops::matmul(a, w), R::mm_bshared, tol, tol);
  }
}

TEST(Matmul, Gradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                   {random_leaf({3, 4}, 1), random_leaf({4, 5}, 2)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                   {random_leaf({2, 3, 4}, 3), random_leaf({2, 4, 5}, 4)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                   {random_leaf({2, 3, 4}, 5), random_leaf({4, 2}, 6)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                   {random_leaf({1, 1}, 7), random_leaf({1, 3}, 8)});
  // Transposed operands through the permute op.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return ops::matmul(ops::transpose(in[0], 0, 1), in[1]); },
      {random_leaf({4, 3}, 9), random_leaf({4, 2}, 10)});
}

TEST(Matmul, EmptyDims) {
  Tensor a = leaf(Tensor::zeros({3, 0}, DType::f64)), b = leaf(Tensor::zeros({0, 2}, DType::f64));
  Tensor c = ops::matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  expect_close(c, std::vector<double>(6, 0.0));
  ops::sum(c).backward();
  EXPECT_EQ(a.grad().shape(), (Shape{3, 0}));
  Tensor m0 = ops::matmul(Tensor::zeros({0, 4}), Tensor::ones({4, 2}));
  EXPECT_EQ(m0.shape(), (Shape{0, 2}));
}

TEST(Matmul, Errors) {
  expect_value_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
                     {"matmul", "[2, 3]", "[4, 5]"});
  expect_value_error([] { ops::matmul(Tensor::zeros({3}), Tensor::zeros({3, 5})); }, {"matmul", "[3]"});
  expect_value_error([] { ops::matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})); },
                     {"matmul", "batch", "[2, 3, 4]", "[3, 4, 5]"});
  expect_value_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 5}, DType::f64)); },
                     {"matmul", "dtype"});
  expect_value_error([] { ops::matmul(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({3, 5}, DType::i64)); },
                     {"matmul", "floating"});
}

TEST(Linear, MatchesTorchForwardAndBackward) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    Tensor x = leaf(ref_tensor(R::lin_x, {2, 3, 4}, dt)), w = leaf(ref_tensor(R::lin_w, {5, 4}, dt));
    Tensor b = leaf(ref_tensor(R::lin_b, {5}, dt));
    Tensor y = ops::linear(x, w, b);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
    expect_close(y, R::lin_y, tol, tol);
    y.backward(Tensor::from_vector(linspace(-1, 1, 30), {2, 3, 5}, dt));
    expect_close(x.grad(), R::lin_gx, tol, tol);
    expect_close(w.grad(), R::lin_gw, tol, tol);
    expect_close(b.grad(), R::lin_gb, tol, tol);
  }
}

TEST(Linear, GradcheckAndEmptyBatch) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                   {random_leaf({4, 3}, 11), random_leaf({2, 3}, 12), random_leaf({2}, 13)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); },
                   {random_leaf({2, 2, 3}, 14), random_leaf({5, 3}, 15)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                   {random_leaf({3}, 16), random_leaf({2, 3}, 17), random_leaf({2}, 18)});
  // Empty batch: output [0, out]; weight and bias gradients are zeros.
  Tensor x = Tensor::zeros({0, 3}, DType::f64), w = random_leaf({2, 3}, 19), b = random_leaf({2}, 20);
  Tensor y = ops::linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
  ops::sum(y).backward();
  expect_close(w.grad(), std::vector<double>(6, 0.0));
  expect_close(b.grad(), {0, 0});
}

TEST(Linear, Errors) {
  expect_value_error([] { ops::linear(Tensor::zeros({2, 3}), Tensor::zeros({5, 4})); },
                     {"linear", "[2, 3]", "[5, 4]"});
  expect_value_error([] { ops::linear(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({4})); },
                     {"linear", "bias", "[4]"});
  expect_value_error([] { ops::linear(Tensor::zeros({2, 4}), Tensor::zeros({4})); }, {"linear", "weight"});
}

// linear_gelu is gelu(linear) as one op (the GEMM's epilogue): same values and gradients as the two
// ops, finite differences in f64, the no-bias, 1-D, empty-batch and in = 0 cases.
TEST(LinearGelu, EqualsGeluOfLinear) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    for (bool with_bias : {true, false}) {
      Generator gen(31);
      Tensor x = leaf(rand_uniform({2, 3, 8}, -2, 2, gen, dt)), w = leaf(rand_uniform({6, 8}, -1, 1, gen, dt));
      Tensor b = with_bias ? leaf(rand_uniform({6}, -1, 1, gen, dt)) : Tensor();
      Tensor dy = rand_uniform({2, 3, 6}, -1, 1, gen, dt);
      Tensor fused = ops::linear_gelu(x, w, b);
      auto gf = grad({fused}, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, {dy});
      Tensor two = ops::gelu(ops::linear(x, w, b), /*tanh_approximation=*/true);
      auto g2 = grad({two}, with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, {dy});
      EXPECT_EQ(fused.shape(), (Shape{2, 3, 6}));
      expect_close(fused, two, tol, tol);
      for (size_t i = 0; i < gf.size(); ++i) expect_close(gf[i], g2[i], tol, tol);
    }
  }
}

TEST(LinearGelu, GradcheckAndEdges) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::linear_gelu(in[0], in[1], in[2]); },
                   {random_leaf({4, 3}, 41), random_leaf({5, 3}, 42), random_leaf({5}, 43)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::linear_gelu(in[0], in[1]); },
                   {random_leaf({3}, 44), random_leaf({2, 3}, 45)});
  Tensor w = random_leaf({2, 3}, 46), b = random_leaf({2}, 47);
  Tensor y = ops::linear_gelu(Tensor::zeros({0, 3}, DType::f64), w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
  ops::sum(y).backward();
  expect_close(w.grad(), std::vector<double>(6, 0.0));
  expect_close(b.grad(), {0, 0});
  // in = 0: no product; y = gelu(b) on every row, and b's gradient is gelu'(b) summed over rows.
  Tensor b0 = leaf(Tensor::from_vector<double>({-1.0, 0.5}, {2}));
  Tensor y0 = ops::linear_gelu(Tensor::zeros({3, 0}, DType::f64), leaf(Tensor::zeros({2, 0}, DType::f64)), b0);
  expect_close(y0, ops::gelu(ops::add(Tensor::zeros({3, 2}, DType::f64), b0.detach()), true), 1e-15, 1e-15);
  ops::sum(y0).backward();
  Tensor gb = grad({ops::sum(ops::gelu(ops::add(Tensor::zeros({3, 2}, DType::f64), b0), true))}, {b0})[0];
  expect_close(b0.grad(), gb, 1e-15, 1e-15);
  expect_value_error([] { ops::linear_gelu(Tensor::zeros({2, 3}), Tensor::zeros({5, 4})); },
                     {"linear_gelu", "[2, 3]", "[5, 4]"});
  expect_value_error([] { ops::linear_gelu(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({4})); },
                     {"linear_gelu", "bias", "[4]"});
}

// mlp_gelu is linear(gelu(linear)) as one op (GELU's derivative and b_fc's gradient in a GEMM's
// epilogue in backward): the values and every gradient of the three ops, through grad() and through
// backward() (whose weight gradients go straight into .grad), finite differences in f64, without
// biases, the shapes with nothing to fuse, and errors that name the op.
TEST(MlpGelu, EqualsLinearOfLinearGelu) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (bool with_bias : {true, false}) {
      Generator gen(61);
      Tensor x = leaf(rand_uniform({2, 3, 8}, -2, 2, gen, dt));
      Tensor wf = leaf(rand_uniform({12, 8}, -1, 1, gen, dt)), wp = leaf(rand_uniform({5, 12}, -1, 1, gen, dt));
      Tensor bf = with_bias ? leaf(rand_uniform({12}, -1, 1, gen, dt)) : Tensor();
      Tensor bp = with_bias ? leaf(rand_uniform({5}, -1, 1, gen, dt)) : Tensor();
      Tensor dy = rand_uniform({2, 3, 5}, -1, 1, gen, dt);
      std::vector<Tensor> inputs = with_bias ? std::vector<Tensor>{x, wf, bf, wp, bp} : std::vector<Tensor>{x, wf, wp};
      Tensor fused = ops::mlp_gelu(x, wf, bf, wp, bp);
      Tensor three = ops::linear(ops::gelu(ops::linear(x, wf, bf), true), wp, bp);
      EXPECT_EQ(fused.shape(), (Shape{2, 3, 5}));
      expect_close(fused, three, tol, tol);
      auto gf = grad({fused}, inputs, {dy}), g3 = grad({three}, inputs, {dy});
      for (size_t i = 0; i < gf.size(); ++i) expect_close(gf[i], g3[i], tol, tol);
      // backward(), twice: .grad made, then added to (the weights' through the GEMMs themselves).
      for (int round = 1; round <= 2; ++round) ops::mlp_gelu(x, wf, bf, wp, bp).backward(dy);
      for (size_t i = 0; i < inputs.size(); ++i) expect_close(inputs[i].grad(), ops::mul(g3[i], 2.0), tol, tol);
    }
  }
}

TEST(MlpGelu, GradcheckEdgesAndErrors) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::mlp_gelu(in[0], in[1], in[2], in[3], in[4]); },
                   {random_leaf({4, 3}, 71), random_leaf({6, 3}, 72), random_leaf({6}, 73), random_leaf({2, 6}, 74),
                    random_leaf({2}, 75)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::mlp_gelu(in[0], in[1], Tensor(), in[2], Tensor()); },
                   {random_leaf({3}, 76), random_leaf({4, 3}, 77), random_leaf({2, 4}, 78)});
  // No rows: [0, out], zero gradients for the weights, and b_fc's sums of nothing.
  Tensor wf = random_leaf({4, 3}, 79), bf = random_leaf({4}, 80), wp = random_leaf({2, 4}, 81), bp = random_leaf({2}, 82);
  Tensor y = ops::mlp_gelu(Tensor::zeros({0, 3}, DType::f64), wf, bf, wp, bp);
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
  ops::sum(y).backward();
  expect_close(wf.grad(), std::vector<double>(12, 0.0));
  expect_close(bf.grad(), std::vector<double>(4, 0.0));
  expect_close(wp.grad(), std::vector<double>(8, 0.0));
  expect_value_error([] { ops::mlp_gelu(Tensor::zeros({2, 3}), Tensor::zeros({5, 4}), Tensor(), Tensor::zeros({2, 5}),
                                        Tensor()); },
                     {"mlp_gelu", "[2, 3]", "[5, 4]"});
  expect_value_error([] { ops::mlp_gelu(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor(), Tensor::zeros({2, 6}),
                                        Tensor()); },
                     {"mlp_gelu", "w_proj", "[2, 6]"});
  expect_value_error([] { ops::mlp_gelu(Tensor::zeros({2, 4}), Tensor::zeros({5, 4}), Tensor::zeros({4}),
                                        Tensor::zeros({2, 5}), Tensor()); },
                     {"mlp_gelu", "b_fc", "[4]"});
}

// Under autocast, linear computes in bf16 and cross_entropy in f32; f32 parameters get f32 grads
// close to the f32 run's.
TEST(Autocast, LinearLowPrecisionLossFloat32) {
  Generator gen(5);
  Tensor x = rand_uniform({8, 16}, -1, 1, gen);
  Tensor w = leaf(rand_uniform({4, 16}, -0.5, 0.5, gen)), b = leaf(rand_uniform({4}, -0.5, 0.5, gen));
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  ops::cross_entropy(ops::relu(ops::linear(x, w, b)), target).backward();
  Tensor gw32 = w.grad().clone();
  w.grad().zero_();
  Tensor loss;
  {
    AutocastGuard guard(DType::bf16);
    Tensor y = ops::linear(x, w, b);
    EXPECT_EQ(y.dtype(), DType::bf16);
    loss = ops::cross_entropy(ops::relu(y), target);
    EXPECT_EQ(loss.dtype(), DType::f32);
  }
  loss.backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  expect_close(w.grad(), gw32, 2e-2, 5e-2);
}

}  // namespace
}  // namespace tandem
