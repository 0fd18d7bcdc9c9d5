// Reductions (sum, mean, argmax): forward against PyTorch values, f64 gradchecks, accuracy of long
// sums, size-0 and size-1 dims, error messages.
#include <cmath>

#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

TEST(Reduce, MatchesTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
    Tensor r = ref_tensor(R::red_x, {3, 4, 5}, dt);
    Tensor s = ops::sum(r);
    EXPECT_EQ(s.dim(), 0);
    expect_close(s, R::red_sum, tol, tol);
    Tensor s1 = ops::sum(r, 1);
    EXPECT_EQ(s1.shape(), (Shape{3, 5}));
    expect_close(s1, R::red_sum1, tol, tol);
    EXPECT_EQ(ops::sum(r, 1, true).shape(), (Shape{3, 1, 5}));
    expect_close(ops::sum(r, 1, true), R::red_sum1, tol, tol);
    expect_close(ops::sum(r, -1), R::red_sum_m1, tol, tol);
    expect_close(ops::mean(r), R::red_mean, tol, tol);
    expect_close(ops::mean(r, 0), R::red_mean0, tol, tol);
    Tensor am = ops::argmax(r, 1);
    EXPECT_EQ(am.dtype(), DType::i64);
    EXPECT_EQ(am.shape(), (Shape{3, 5}));
    expect_close(am, R::red_argmax1, 0, 0);
    expect_close(ops::argmax(r, -1), R::red_argmax2, 0, 0);
  }
}

TEST(Reduce, LargeSumIsAccurateAndIntegerSum) {
  Tensor big = Tensor::full({1000, 257}, 0.1);
  EXPECT_NEAR(ops::sum(big).item(), 25700.0, 25700.0 * 1e-5);
  expect_close(ops::sum(big, 0), std::vector<double>(257, 100.0), 1e-3, 1e-5);
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(ops::sum(i, 0).to_vector<int64_t>(), (std::vector<int64_t>{4, 6}));
}

TEST(Reduce, Gradcheck) {
  Tensor x = random_leaf({3, 4, 5}, 11);
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::sum(in[0]); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::mean(in[0]); }, {x});
  for (int64_t d : {0, 1, 2, -1}) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << d << " keepdim " << keep);
      expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::sum(in[0], d, keep); }, {x});
      expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::mean(in[0], d, keep); }, {x});
    }
  }
}

TEST(Reduce, EmptyAndSizeOne) {
  Tensor e = Tensor::empty({0, 4}, DType::f64);
  EXPECT_EQ(ops::sum(e).item(), 0.0);
  EXPECT_TRUE(std::isnan(ops::mean(e).item()));
  expect_close(ops::sum(e, 0), {0, 0, 0, 0});
  EXPECT_EQ(ops::sum(e, 1).shape(), (Shape{0}));
  Tensor one = Tensor::from_vector<double>({1, 2, 3}, {1, 3});
  expect_close(ops::mean(one, 0), {1, 2, 3});
  EXPECT_EQ(ops::argmax(one, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(Reduce, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  expect_value_error([&] { ops::sum(x, 2); }, {"sum", "dim 2", "out of range"});
  expect_value_error([&] { ops::mean(x, -3); }, {"mean", "dim -3"});
  expect_value_error([&] { ops::mean(Tensor::zeros({2}, DType::i64)); }, {"mean", "floating"});
  expect_value_error([&] { ops::argmax(Tensor::zeros({2, 0}), 1); }, {"argmax", "[2, 0]", "empty"});
}

}  // namespace
}  // namespace tandem
