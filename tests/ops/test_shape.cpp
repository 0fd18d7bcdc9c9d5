// Shape ops: views (reshape, flatten, slice0) sharing storage, permute/transpose/concat against
// PyTorch values, f64 gradchecks, casts and device moves, error messages.
#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

TEST(Shape, ViewsShareStorageAndGradientsReshape) {
  Tensor x = random_leaf({2, 3, 4}, 21);
  Tensor r = ops::reshape(x, {4, -1});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_EQ(r.data_ptr(), x.data_ptr());
  Tensor f = ops::flatten(x);
  EXPECT_EQ(f.shape(), (Shape{2, 12}));
  EXPECT_EQ(ops::flatten(x, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(ops::flatten(x, 0).shape(), (Shape{24}));
  EXPECT_EQ(ops::flatten(Tensor::scalar(1.0)).shape(), (Shape{1}));
  Tensor s = ops::slice0(x, 1, 2);
  EXPECT_EQ(s.shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(static_cast<char*>(s.data_ptr()), static_cast<char*>(x.data_ptr()) + 12 * sizeof(double));
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::reshape(in[0], {4, 6}); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::flatten(in[0], 1); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::slice0(in[0], 1, 2) * 3.0; }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::slice0(in[0], 0, 0) + 1.0; }, {x});
  // slice0's backward pads: rows outside the slice get zeros.
  Tensor y = leaf(Tensor::ones({3, 2}, DType::f64));
  ops::sum(ops::slice0(y, 1, 3)).backward();
  expect_close(y.grad(), {0, 0, 1, 1, 1, 1});
}

// A slice of a parameter adds its gradient into the rows of .grad in place (the engine's sink), with
// the bits of the zero-padded gradient added by the engine: what a slice of an interior tensor
// still returns. Two backwards, the parameter also used whole.
TEST(Shape, Slice0OfAParameterAddsIntoItsGradInPlace) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor w = leaf(ops::cast(random_leaf({4, 3}, 23), dt).detach());
    const Tensor a = ops::cast(random_leaf({2, 3}, 24), dt).detach(),
                 b = ops::cast(random_leaf({4, 3}, 25), dt).detach();
    auto loss = [&](const Tensor& x) { return ops::sum(ops::slice0(x, 1, 3) * a) + ops::sum(x * b); };
    loss(w).backward();
    const void* storage = w.grad().data_ptr();
    loss(w).backward();
    EXPECT_EQ(w.grad().data_ptr(), storage);  // added in place
    // The same through an interior tensor (x = w * 1: no sink for the slice, its padded gradient).
    Tensor v = leaf(w.detach());
    for (int step = 0; step < 2; ++step) loss(v * 1.0).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), v.grad().to_vector<double>());
    std::vector<double> want = ops::add(b, b).to_vector<double>(), av = a.to_vector<double>();
    for (size_t i = 0; i < av.size(); ++i) want[3 + i] += 2 * av[i];  // rows 1 and 2
    expect_close(w.grad(), want, dt == DType::f32 ? 1e-6 : 1e-12);
  }
}

TEST(Shape, PermuteTransposeConcatMatchTorch) {
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    Tensor x = ref_tensor(R::sh_x, {2, 3, 4}, DType::f64);
    if (dt == DType::i64) x = ops::mul(x, 1000.0);  // distinct integers after the cast
    Tensor xc = ops::cast(x, dt);
    Tensor p = ops::permute(xc, {2, 0, 1});
    EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
    Tensor t = ops::transpose(xc, 0, -1);
    EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
    if (dt == DType::i64) {
      Tensor back = ops::permute(p, {1, 2, 0});
      EXPECT_EQ(back.to_vector<int64_t>(), xc.to_vector<int64_t>());
      continue;
    }
    const double tol = dt == DType::f64 ? 0 : 1e-7;
    expect_close(p, R::sh_perm201, tol, tol);
    expect_close(t, R::sh_t02, tol, tol);
    Tensor c = ops::concat({ref_tensor(R::cat_a, {2, 1, 3}, dt), ref_tensor(R::cat_b, {2, 2, 3}, dt)}, 1);
    EXPECT_EQ(c.shape(), (Shape{2, 3, 3}));
    expect_close(c, R::cat_1, tol, tol);
  }
}

TEST(Shape, GradcheckCopies) {
  Tensor x = random_leaf({2, 3, 4}, 31);
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::permute(in[0], {2, 0, 1}); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::permute(in[0], {1, 2, 0}); }, {x});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::transpose(in[0], 1, 2); }, {x});
  Tensor a = random_leaf({2, 1, 3}, 32), b = random_leaf({2, 2, 3}, 33), c = random_leaf({2, 0, 3}, 34);
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::concat(in, 1); }, {a, b, c});
  Tensor d = random_leaf({1, 3}, 35), e = random_leaf({2, 3}, 36);
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::concat(in, 0); }, {d, e});
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::concat({in[0], in[0]}, -1); }, {d});
  // A permute feeding a matmul-like use: non-contiguous-looking layouts are materialised.
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::mul(ops::transpose(in[0], 0, 1), in[1]); },
                   {random_leaf({3, 2}, 37), random_leaf({2, 3}, 38)});
}

TEST(Shape, CastAndToDevice) {
  Tensor x = random_leaf({3, 2}, 41);
  Tensor f = ops::cast(x, DType::f32);
  EXPECT_EQ(f.dtype(), DType::f32);
  Tensor h = ops::cast(f, DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  ops::sum(ops::cast(ops::mul(h, 2.0), DType::f32)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f64);
  expect_close(x.grad(), std::vector<double>(6, 2.0));
  EXPECT_TRUE(ops::cast(x, DType::f64).is_same(x));
  expect_gradcheck([](const std::vector<Tensor>& in) { return ops::cast(ops::cast(in[0], DType::f32), DType::f64); },
                   {x}, 1e-3, 1e-5, 1e-3);
  Tensor i = ops::cast(Tensor::from_vector<double>({1.7, -2.2}, {2}), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -2}));

  Device other(DeviceKind::CPU, 1);
  Tensor moved = ops::to_device(x, other);
  EXPECT_EQ(moved.device(), other);
  EXPECT_TRUE(ops::to_device(x, x.device()).is_same(x));
  expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::to_device(ops::to_device(in[0], other), kCPU); },
                   {x});
  Tensor y = leaf(Tensor::ones({2}, DType::f64));
  ops::sum(ops::to_device(y, other) * 3.0).backward();
  EXPECT_EQ(y.grad().device(), kCPU);
  expect_close(y.grad(), {3, 3});
}

TEST(Shape, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4});
  expect_value_error([&] { ops::reshape(x, {5, 5}); }, {"[5, 5]", "[2, 3, 4]"});
  expect_value_error([&] { ops::permute(x, {0, 0, 1}); }, {"permute", "repeats", "[2, 3, 4]"});
  expect_value_error([&] { ops::permute(x, {0, 1}); }, {"permute", "[2, 3, 4]"});
  expect_value_error([&] { ops::transpose(x, 0, 3); }, {"transpose", "dim 3"});
  expect_value_error([&] { ops::concat({x, Tensor::zeros({2, 5, 4})}, 0); }, {"concat", "[2, 5, 4]", "[2, 3, 4]"});
  expect_value_error([&] { ops::concat({x, Tensor::zeros({2, 3, 4}, DType::f64)}, 0); }, {"concat", "dtype"});
  expect_value_error([&] { ops::slice0(x, 1, 3); }, {"slice0", "[1, 3)", "[2, 3, 4]"});
  expect_value_error([&] { ops::flatten(x, 2, 1); }, {"flatten", "[2, 3, 4]"});
}

}  // namespace
}  // namespace tandem
