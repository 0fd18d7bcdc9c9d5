// ops::slice / ops::narrow along any dim: values against slice0 of a permuted tensor, views where
// the slice is contiguous, f64 gradchecks for every dim (negative too), zero-padded gradients, and
// the range errors.
#include "tests/ops/ops_test_util.h"

namespace tandem {
namespace {
using namespace testing;

// The reference: move `dim` to the front, take rows there, move it back.
Tensor slice_by_permute(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  return ops::transpose(ops::slice0(ops::transpose(x, 0, dim), start, end), 0, dim);
}

TEST(Slice, EveryDimMatchesSlice0OfThePermutedTensor) {
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    Tensor x = ops::cast(random_leaf({3, 4, 5}, 31, -9, 9), dt).detach();
    for (int64_t dim : {0, 1, 2, -1, -2}) {
      const int64_t n = x.size(dim);
      for (auto [s, e] : {std::pair<int64_t, int64_t>{0, n}, {1, n - 1}, {2, 2}, {n - 1, n}}) {
        Tensor got = ops::slice(x, dim, s, e), want = slice_by_permute(x, dim, s, e);
        ASSERT_EQ(got.shape(), want.shape()) << "dim " << dim << " [" << s << ", " << e << ")";
        EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << "dim " << dim << " [" << s << ", " << e << ")";
      }
    }
  }
  Tensor x = random_leaf({2, 6}, 32);
  EXPECT_EQ(ops::narrow(x, -1, 2, 3).to_vector<double>(), ops::slice(x, 1, 2, 5).to_vector<double>());
}

// A packed input split into its columns: the parts concatenate back to it.
TEST(Slice, SplitsAPackedInputIntoColumns) {
  Tensor x = random_leaf({4, 5}, 33);
  Tensor a = ops::slice(x, -1, 0, 3), b = ops::slice(x, -1, 3, 5);
  EXPECT_EQ(a.shape(), (Shape{4, 3}));
  EXPECT_EQ(b.shape(), (Shape{4, 2}));
  EXPECT_EQ(ops::concat({a, b}, 1).to_vector<double>(), x.to_vector<double>());
}

TEST(Slice, ContiguousSlicesAreViews) {
  Tensor x = random_leaf({1, 6, 4}, 34);
  Tensor s = ops::slice(x, 1, 2, 4);  // only a size-1 dim before dim 1
  EXPECT_EQ(s.shape(), (Shape{1, 2, 4}));
  EXPECT_EQ(static_cast<char*>(s.data_ptr()), static_cast<char*>(x.data_ptr()) + 8 * sizeof(double));
  Tensor r = ops::slice(x, 0, 0, 1);
  EXPECT_EQ(r.data_ptr(), x.data_ptr());
}

TEST(Slice, GradcheckEveryDim) {
  Tensor x = random_leaf({3, 4, 5}, 35);
  for (int64_t dim : {0, 1, 2, -1, -3})
    for (auto [s, e] : {std::pair<int64_t, int64_t>{1, 3}, {0, 1}, {2, 2}}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " [" + std::to_string(s) + ", " + std::to_string(e) + ")");
      expect_gradcheck([=](const std::vector<Tensor>& in) { return ops::slice(in[0], dim, s, e) * 3.0; }, {x});
    }
  // Two slices of one tensor (a packed input's columns) used apart.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return ops::tanh(ops::slice(in[0], -1, 0, 2)) * ops::slice(in[0], -1, 3, 5);
      },
      {x});
}

TEST(Slice, GradientIsZeroOutsideTheRange) {
  Tensor y = leaf(Tensor::ones({2, 3}, DType::f64));
  ops::sum(ops::slice(y, 1, 1, 3) * 2.0).backward();
  expect_close(y.grad(), {0, 2, 2, 0, 2, 2});
}

TEST(Slice, RangeErrorsNameTheShape) {
  Tensor x = random_leaf({2, 3, 4}, 36);
  expect_value_error([&] { ops::slice(x, 2, 3, 5); }, {"slice", "[3, 5)", "dim 2", "size 4", "[2, 3, 4]"});
  expect_value_error([&] { ops::slice(x, -1, 2, 1); }, {"slice", "[2, 1)"});
  expect_value_error([&] { ops::slice(x, 1, -1, 2); }, {"slice", "[-1, 2)"});
  expect_value_error([&] { ops::slice(x, 3, 0, 1); }, {"slice", "dim 3", "3 dims"});
  expect_value_error([&] { ops::narrow(x, 0, 0, -1); }, {"narrow", "length -1"});
  expect_value_error([&] { ops::slice(Tensor::scalar(1.0), 0, 0, 1); }, {"slice", "0-dim"});
}

}  // namespace
}  // namespace tandem
