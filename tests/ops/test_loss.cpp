// softmax/log_softmax, cross_entropy and mse_loss: forward (and some gradients) against PyTorch
// values, f64 gradchecks, empty dims, f16/bf16 inputs, error messages.
#include <cmath>

#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

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

TEST(BinaryCrossEntropyWithLogits, MatchesTorchAndGradcheck) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    Tensor x = ref_tensor(R::bce_x, {3, 5}, dt), t = ref_tensor(R::bce_t, {3, 5}, dt);
    x.set_requires_grad(true);
    Tensor loss = ops::binary_cross_entropy_with_logits(x, t);
    expect_close(loss, R::bce_mean, tol, tol);
    expect_close(ops::binary_cross_entropy_with_logits(x, t, ops::Reduction::Sum), R::bce_sum, tol, tol);
    expect_close(ops::binary_cross_entropy_with_logits(x, t, ops::Reduction::None), R::bce_none, tol, tol);
    loss.backward();  // the logits include 0 and +-120: the gradient there is sigmoid(x) - t
    expect_close(x.grad(), R::bce_grad, tol, tol);
  }
  for (auto red : {ops::Reduction::Mean, ops::Reduction::Sum, ops::Reduction::None})
    expect_gradcheck(
        [=](const std::vector<Tensor>& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1], red); },
        {random_leaf({4, 3}, 43, -5, 5), random_leaf({4, 3}, 44, 0, 1)});
  expect_value_error([] { ops::binary_cross_entropy_with_logits(Tensor::zeros({4, 3}), Tensor::zeros({4})); },
                     {"binary_cross_entropy_with_logits", "[4, 3]", "[4]"});
}

}  // namespace
}  // namespace tandem
