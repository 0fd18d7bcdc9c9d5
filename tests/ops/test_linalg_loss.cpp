// matmul, linear, softmax/log_softmax, cross_entropy and mse_loss: forward (and some gradients)
// against PyTorch values, f64 gradchecks, empty dims, f16 inputs, error messages.
#include <cmath>

#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

std::vector<double> linspace(double lo, double hi, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}

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

TEST(Softmax, MatchesTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    Tensor s = ref_tensor(R::sm_x, {2, 3, 4}, dt);
    expect_close(ops::softmax(s, -1), R::sm_last, tol, tol);
    expect_close(ops::softmax(s, 1), R::sm_mid, tol, tol);
    expect_close(ops::log_softmax(s, 2), R::lsm_last, tol, tol);
    expect_close(ops::log_softmax(s, 0), R::lsm_first, tol, tol);
  }
}

TEST(Softmax, GradcheckEveryDim) {
  Tensor x = random_leaf({2, 3, 4}, 21, -3, 3);
  for (int64_t d : {0, 1, 2}) {
    SCOPED_TRACE(d);
    expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::softmax(in[0], d); }, {x});
    expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::log_softmax(in[0], d); }, {x});
  }
}

TEST(Softmax, LargeLogitsHalfAndEmpty) {
  Tensor big = Tensor::from_vector<float>({1000.f, 1001.f, -1e30f}, {1, 3});
  std::vector<float> p = ops::softmax(big, 1).to_vector<float>();
  EXPECT_NEAR(p[0], 0.26894142f, 1e-6);
  EXPECT_NEAR(p[1], 0.73105858f, 1e-6);
  EXPECT_EQ(p[2], 0.f);
  Tensor h = ref_tensor(R::sm_x, {2, 3, 4}, DType::f16);
  Tensor ph = ops::softmax(h, -1);
  EXPECT_EQ(ph.dtype(), DType::f16);
  expect_close(ops::cast(ph, DType::f32), R::sm_last, 3e-3, 3e-3);
  EXPECT_EQ(ops::softmax(Tensor::zeros({0, 5}), 1).shape(), (Shape{0, 5}));
  EXPECT_EQ(ops::log_softmax(Tensor::zeros({3, 0}), 1).shape(), (Shape{3, 0}));
}

TEST(CrossEntropy, MatchesTorchWithIgnoreIndex) {
  const std::vector<std::pair<ops::Reduction, std::pair<std::vector<double>, std::vector<double>>>> cases = {
      {ops::Reduction::Mean, {R::ce_mean, R::ce_mean_grad}},
      {ops::Reduction::Sum, {R::ce_sum, R::ce_sum_grad}},
      {ops::Reduction::None, {R::ce_none, R::ce_none_grad}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (DType tt : {DType::i64, DType::i32}) {
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      Tensor target = Tensor::from_vector(R::ce_target, {6}, tt);
      for (const auto& [red, want] : cases) {
        Tensor logits = leaf(ref_tensor(R::ce_logits, {6, 5}, dt));
        Tensor loss = ops::cross_entropy(logits, target, -100, red);
        EXPECT_EQ(loss.shape(), red == ops::Reduction::None ? Shape{6} : Shape{});
        expect_close(loss, want.first, tol, tol);
        Tensor g = red == ops::Reduction::None ? Tensor::from_vector(linspace(1, 6, 6), {6}, dt) : Tensor();
        loss.backward(g);
        expect_close(logits.grad(), want.second, tol, tol);
      }
    }
  }
}

TEST(CrossEntropy, Gradcheck) {
  Tensor target = Tensor::from_vector<int64_t>({2, 0, 3, 3, 1}, {5});
  Tensor ignoring = Tensor::from_vector<int64_t>({2, 7, 3, 7, 1}, {5});
  Tensor logits = random_leaf({5, 4}, 31, -2, 2);
  for (auto red : {ops::Reduction::Mean, ops::Reduction::Sum, ops::Reduction::None}) {
    expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::cross_entropy(in[0], target, -100, red); },
                     {logits});
    expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::cross_entropy(in[0], ignoring, 7, red); },
                     {logits});
  }
}

TEST(CrossEntropy, AllIgnoredIsNaNAndHalfInput) {
  Tensor logits = Tensor::zeros({2, 3});
  Tensor target = Tensor::from_vector<int64_t>({-100, -100}, {2});
  EXPECT_TRUE(std::isnan(ops::cross_entropy(logits, target).item()));
  EXPECT_EQ(ops::cross_entropy(logits, target, -100, ops::Reduction::Sum).item(), 0.0);
  Tensor h = leaf(ref_tensor(R::ce_logits, {6, 5}, DType::bf16));
  Tensor loss = ops::cross_entropy(h, Tensor::from_vector(R::ce_target, {6}, DType::i64));
  EXPECT_EQ(loss.dtype(), DType::bf16);
  EXPECT_NEAR(loss.item(), R::ce_mean[0], 0.03);
  loss.backward();
  EXPECT_EQ(h.grad().dtype(), DType::bf16);
  expect_close(ops::cast(h.grad(), DType::f32), R::ce_mean_grad, 5e-3, 2e-2);
}

TEST(CrossEntropy, Errors) {
  Tensor logits = Tensor::zeros({3, 4});
  expect_value_error([&] { ops::cross_entropy(logits, Tensor::from_vector<int64_t>({0, 4, 1}, {3})); },
                     {"cross_entropy", "target 4", "row 1", "[0, 4)"});
  expect_value_error([&] { ops::cross_entropy(logits, Tensor::zeros({3})); }, {"cross_entropy", "target", "f32"});
  expect_value_error([&] { ops::cross_entropy(logits, Tensor::zeros({2}, DType::i64)); },
                     {"cross_entropy", "[2]", "[3, 4]"});
  expect_value_error([&] { ops::cross_entropy(Tensor::zeros({3}), Tensor::zeros({3}, DType::i64)); },
                     {"cross_entropy", "[N, C]", "[3]"});
}

TEST(MseLoss, MatchesTorchAndGradcheck) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    Tensor in = ref_tensor(R::mse_in, {4, 3}, dt), t = ref_tensor(R::mse_t, {4, 3}, dt);
    expect_close(ops::mse_loss(in, t), R::mse_mean, tol, tol);
    expect_close(ops::mse_loss(in, t, ops::Reduction::Sum), R::mse_sum, tol, tol);
    EXPECT_EQ(ops::mse_loss(in, t, ops::Reduction::None).shape(), (Shape{4, 3}));
  }
  for (auto red : {ops::Reduction::Mean, ops::Reduction::Sum, ops::Reduction::None})
    expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::mse_loss(in[0], in[1], red); },
                     {random_leaf({4, 3}, 41), random_leaf({4, 3}, 42)});
  expect_value_error([] { ops::mse_loss(Tensor::zeros({4, 3}), Tensor::zeros({3})); }, {"mse_loss", "[4, 3]", "[3]"});
}

}  // namespace
}  // namespace tandem

#include "runtime/autocast.h"

namespace tandem {
namespace {
using namespace testing;

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
