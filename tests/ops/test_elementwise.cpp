// Elementwise ops: forward against PyTorch values, f64 gradchecks (broadcasting included), f16/bf16
// and integer dtypes, size-0 and size-1 dims, error messages.
#include <cmath>

#include "tests/ops/ops_test_util.h"
#include "tests/reference/ops_a_values.h"

namespace tandem {
namespace {
using namespace testing;
namespace R = ref::ops_a;

class DTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(DTypeTest, BinaryBroadcastMatchesTorch) {
  const DType dt = GetParam();
  const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
  Tensor a = ref_tensor(R::bc_a, {2, 3, 4}, dt), b = ref_tensor(R::bc_b, {3, 1}, dt);
  expect_close(ops::add(a, b), R::bc_add, tol, tol);
  expect_close(ops::sub(a, b), R::bc_sub, tol, tol);
  expect_close(ops::mul(a, b), R::bc_mul, tol, tol);
  expect_close(ops::div(a, b), R::bc_div, tol, tol);
  expect_close(a - b, R::bc_sub, tol, tol);
  // Broadcasting the other way round.
  Tensor ba = ops::sub(b, a);
  EXPECT_EQ(ba.shape(), (Shape{2, 3, 4}));
  std::vector<double> neg = R::bc_sub;
  for (double& v : neg) v = -v;
  expect_close(ba, neg, tol, tol);
  Tensor x = ref_tensor(R::bias_x, {5, 4}, dt), bias = ref_tensor(R::bias_b, {4}, dt);
  expect_close(x + bias, R::bias_add, tol, tol);
}

TEST_P(DTypeTest, UnaryMatchesTorch) {
  const DType dt = GetParam();
  const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
  Tensor u = ref_tensor(R::un_x, {3, 5}, dt), p = ref_tensor(R::un_p, {3, 5}, dt);
  expect_close(ops::relu(u), R::un_relu, tol, tol);
  expect_close(ops::gelu(u), R::un_gelu, tol, tol);
  expect_close(ops::gelu(u, true), R::un_gelu_tanh, tol, tol);
  expect_close(ops::tanh(u), R::un_tanh, tol, tol);
  expect_close(ops::sigmoid(u), R::un_sigmoid, tol, tol);
  expect_close(ops::exp(u), R::un_exp, tol, tol);
  expect_close(-u, R::un_neg, tol, tol);
  expect_close(u + 2.5, R::un_add_s, tol, tol);
  expect_close(u * -1.5, R::un_mul_s, tol, tol);
  expect_close(ops::rsub(2.0, u), R::un_rsub, tol, tol);
  expect_close(ops::log(p), R::un_log, tol, tol);
  expect_close(ops::sqrt(p), R::un_sqrt, tol, tol);
  expect_close(ops::pow(u, 3.0), R::un_pow3, tol, tol);
  expect_close(ops::pow(p, 0.5), R::un_pow_half, tol, tol);
  expect_close(ops::pow(p, -1.5), R::un_pow_m15, tol, tol);
}

INSTANTIATE_TEST_SUITE_P(Ops, DTypeTest, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// f16/bf16 compute in f32 and round once: results equal the f32 result rounded.
TEST(Elementwise, HalfAndBFloat16RoundOnce) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor a = ref_tensor(R::bc_a, {2, 3, 4}, dt), b = ref_tensor(R::bc_b, {3, 1}, dt);
    Tensor a32 = ops::cast(a, DType::f32), b32 = ops::cast(b, DType::f32);
    for (auto fn : {+[](const Tensor& x, const Tensor& y) { return ops::mul(x, y); },
                    +[](const Tensor& x, const Tensor& y) { return ops::div(x, y); },
                    +[](const Tensor& x, const Tensor& y) { return ops::add(ops::gelu(x), y); }}) {
      Tensor lo = fn(a, b);
      ASSERT_EQ(lo.dtype(), dt);
      Tensor want = ops::cast(ops::cast(fn(a32, b32), dt), DType::f32);
      // add(gelu) rounds twice (after gelu, after add) in low precision: allow one ulp.
      expect_close(ops::cast(lo, DType::f32), want, dt == DType::f16 ? 2e-3 : 1.6e-2, 1e-2);
    }
    Tensor r = ops::relu(a);
    EXPECT_EQ(r.dtype(), dt);
    expect_close(ops::cast(r, DType::f32), ops::relu(a32), 0, 0);
  }
}

TEST(Elementwise, FloatingPromotion) {
  Tensor h = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}, DType::bf16));
  Tensor f = leaf(Tensor::from_vector<double>({0.5, 0.25, 4}, {3}, DType::f32));
  Tensor y = h * f;
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_close(y, {0.5, 0.5, 12});
  ops::sum(y).backward();
  EXPECT_EQ(h.grad().dtype(), DType::bf16);
  EXPECT_EQ(f.grad().dtype(), DType::f32);
  expect_close(ops::cast(h.grad(), DType::f32), {0.5, 0.25, 4});
  expect_close(f.grad(), {1, 2, 3});
  EXPECT_EQ((Tensor::zeros({2}, DType::f16) + Tensor::zeros({2}, DType::bf16)).dtype(), DType::f32);
  EXPECT_EQ((Tensor::zeros({2}, DType::f32) - Tensor::zeros({2}, DType::f64)).dtype(), DType::f64);
}

// An add of a wider and a narrower floating tensor of one shape runs in one pass (the narrow one
// widened as it is read): the values and gradients of casting it first, bit for bit, in both orders;
// a broadcast add still casts.
TEST(Elementwise, WideningAddEqualsCastThenAdd) {
  std::vector<double> av, bv;
  for (int i = 0; i < 2 * 37; ++i) {
    av.push_back(std::sin(0.37 * i) * 5);
    bv.push_back(std::cos(0.91 * i) * 3 + 1e-3 * i);
  }
  for (auto [wide, narrow] : {std::pair{DType::f32, DType::bf16}, std::pair{DType::f32, DType::f16},
                              std::pair{DType::f64, DType::f32}, std::pair{DType::f64, DType::bf16}})
    for (bool narrow_first : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(narrow)) + " + " + dtype_name(wide) + (narrow_first ? ", narrow first" : ""));
      Tensor w = leaf(Tensor::from_vector<double>(av, {2, 37}, wide)), n = leaf(Tensor::from_vector<double>(bv, {2, 37}, narrow));
      Tensor w2 = leaf(w.detach().clone()), n2 = leaf(n.detach().clone());
      Tensor y = narrow_first ? n + w : w + n;
      Tensor y2 = narrow_first ? ops::cast(n2, wide) + w2 : w2 + ops::cast(n2, wide);
      EXPECT_EQ(y.dtype(), wide);
      EXPECT_EQ(y.to_vector<double>(), y2.to_vector<double>());
      Tensor r = Tensor::from_vector<double>(bv, {2, 37}, wide);
      ops::sum(y * r).backward();
      ops::sum(y2 * r).backward();
      EXPECT_EQ(n.grad().dtype(), narrow);
      EXPECT_EQ(n.grad().to_vector<double>(), n2.grad().to_vector<double>());
      EXPECT_EQ(w.grad().to_vector<double>(), w2.grad().to_vector<double>());
    }
  Tensor row = Tensor::from_vector<double>({1, 2, 3}, {3}, DType::bf16);
  Tensor m = Tensor::from_vector<double>({0.5, 0.25, 4, 1, 1, 1}, {2, 3}, DType::f32);
  expect_close(m + row, {1.5, 2.25, 7, 2, 3, 4});
}

TEST(Elementwise, IntegerAddSubMul) {
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor a = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    Tensor b = Tensor::from_vector<int64_t>({10, -20, 30}, {3}, dt);
    EXPECT_EQ((a + b).to_vector<int64_t>(), (std::vector<int64_t>{11, -18, 33, 14, -15, 36}));
    EXPECT_EQ((a - b).to_vector<int64_t>(), (std::vector<int64_t>{-9, 22, -27, -6, 25, -24}));
    EXPECT_EQ((a * b).to_vector<int64_t>(), (std::vector<int64_t>{10, -40, 90, 40, -100, 180}));
    EXPECT_EQ((a * 3.0 + 1.0).to_vector<int64_t>(), (std::vector<int64_t>{4, 7, 10, 13, 16, 19}));
    EXPECT_EQ((a + b).dtype(), dt);
  }
}

TEST(Elementwise, SizeOneSizeZeroAndScalarDims) {
  Tensor a = Tensor::from_vector<double>({1, 2, 3}, {1, 3});
  Tensor b = Tensor::from_vector<double>({10, 20}, {2, 1});
  Tensor c = a + b;
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  expect_close(c, {11, 12, 13, 21, 22, 23});
  Tensor s = Tensor::scalar(2.0, DType::f64);
  EXPECT_EQ(s.dim(), 0);
  expect_close(a * s, {2, 4, 6});
  expect_close(s - a, {1, 0, -1});
  Tensor e = Tensor::empty({0, 3}, DType::f64);
  Tensor ez = e + a;
  EXPECT_EQ(ez.shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::relu(e).shape(), (Shape{0, 3}));
  // Backward through an empty broadcast: the [1, 3] operand gets zeros.
  Tensor la = leaf(a), le = leaf(e);
  ops::sum(ops::mul(le, la)).backward();
  expect_close(la.grad(), {0, 0, 0});
  EXPECT_EQ(le.grad().shape(), (Shape{0, 3}));
}

TEST(Elementwise, GradcheckBinaryBroadcast) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {3, 1}}, {{5, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3}, {}}, {{}, {2, 3}}, {{2, 3}, {2, 3}}, {{4}, {2, 1, 4}}};
  uint64_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_leaf(sa, seed++), b = random_leaf(sb, seed++, 0.5, 1.5);  // b away from 0 for div
    SCOPED_TRACE(shape_str(sa) + " op " + shape_str(sb));
    expect_gradcheck([](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); }, {a, b});
    expect_gradcheck([](const std::vector<Tensor>& in) { return ops::sub(in[0], in[1]); }, {a, b});
    expect_gradcheck([](const std::vector<Tensor>& in) { return ops::mul(in[0], in[1]); }, {a, b});
    expect_gradcheck([](const std::vector<Tensor>& in) { return ops::div(in[0], in[1]); }, {a, b});
  }
  // Only one side requiring grad.
  Tensor a = random_leaf({3, 4}, 50), b = Tensor::ones({4}, DType::f64) * 2.0;
  expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::div(in[0], b); }, {a});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::mul(b, in[0]); }, {a});
}

TEST(Elementwise, GradcheckUnary) {
  Tensor x = random_leaf({3, 4}, 7, -2.0, 2.0);
  Tensor p = random_leaf({3, 4}, 8, 0.2, 2.0);
  using Fn = Tensor (*)(const Tensor&);
  std::vector<std::pair<const char*, Fn>> on_x = {
      {"relu", [](const Tensor& t) { return ops::relu(t); }},
      {"gelu", [](const Tensor& t) { return ops::gelu(t); }},
      {"gelu_tanh", [](const Tensor& t) { return ops::gelu(t, true); }},
      {"tanh", [](const Tensor& t) { return ops::tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return ops::sigmoid(t); }},
      {"exp", [](const Tensor& t) { return ops::exp(t); }},
      {"neg", [](const Tensor& t) { return ops::neg(t); }},
      {"add_s", [](const Tensor& t) { return t + 3.0; }},
      {"mul_s", [](const Tensor& t) { return t * -2.5; }},
      {"rsub", [](const Tensor& t) { return ops::rsub(1.5, t); }},
      {"pow2", [](const Tensor& t) { return ops::pow(t, 2.0); }},
      {"pow3", [](const Tensor& t) { return ops::pow(t, 3.0); }},
      {"pow0", [](const Tensor& t) { return ops::pow(t, 0.0) * t; }},
  };
  for (auto& [name, fn] : on_x) {
    SCOPED_TRACE(name);
    expect_gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0]); }, {x});
  }
  std::vector<std::pair<const char*, Fn>> on_p = {
      {"log", [](const Tensor& t) { return ops::log(t); }},
      {"sqrt", [](const Tensor& t) { return ops::sqrt(t); }},
      {"pow_half", [](const Tensor& t) { return ops::pow(t, 0.5); }},
      {"pow_m15", [](const Tensor& t) { return ops::pow(t, -1.5); }},
  };
  for (auto& [name, fn] : on_p) {
    SCOPED_TRACE(name);
    expect_gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0]); }, {p});
  }
}

TEST(Elementwise, ReluBackwardUsesOutputAndKeepsNaN) {
  Tensor x = leaf(Tensor::from_vector<float>({-1.f, 0.f, 2.f, NAN}, {4}));
  Tensor y = ops::relu(x);
  std::vector<float> yv = y.to_vector<float>();
  EXPECT_EQ(yv[0], 0.f);
  EXPECT_EQ(yv[2], 2.f);
  EXPECT_TRUE(std::isnan(yv[3]));
  y.backward(Tensor::ones({4}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.f, 0.f, 1.f, 0.f}));
}

TEST(Elementwise, Errors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  expect_value_error([&] { ops::add(a, b); }, {"add", "[2, 3]", "[4]", "broadcast"});
  expect_value_error([&] { ops::mul(Tensor::zeros({2, 3}), Tensor::zeros({3, 3})); }, {"mul", "[2, 3]", "[3, 3]"});
  expect_value_error([&] { ops::sub(a, Tensor::zeros({2, 3}, DType::i64)); }, {"sub", "dtype", "f32", "i64"});
  expect_value_error([&] { ops::div(Tensor::zeros({2}, DType::i64), Tensor::ones({2}, DType::i64)); },
                     {"div", "i64"});
  expect_value_error([&] { ops::relu(Tensor::zeros({2}, DType::i32)); }, {"relu", "floating", "i32"});
  expect_value_error([&] { ops::exp(Tensor()); }, {"exp", "undefined"});
}

}  // namespace
}  // namespace tandem
