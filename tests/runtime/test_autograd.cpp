// The autograd engine on a host-side test op (square), independent of any backend op.
#include <gtest/gtest.h>

#include "runtime/autograd.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {
// y = x * x elementwise, on host data, f64.
Tensor square(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  const double* a = x.data<double>();
  double* b = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] * a[i];
  return record("square", {x}, y, [x](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(x.shape(), DType::f64);
    for (int64_t i = 0; i < x.numel(); ++i) dx.data<double>()[i] = 2 * x.data<double>()[i] * g[0].data<double>()[i];
    return {dx};
  });
}
// sum of all elements into a scalar.
Tensor total(const Tensor& x) {
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += x.data<double>()[i];
  Shape shape = x.shape();
  return record("total", {x}, Tensor::scalar(s, DType::f64), [shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{Tensor::full(shape, g[0].item(), DType::f64)};
  });
}
Tensor leaf(std::vector<double> v) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Autograd, ChainAndAccumulation) {
  Tensor x = leaf({1, 2, 3});
  Tensor loss = total(square(square(x)));  // sum x^4 -> grad 4x^3
  loss.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 32, 108}));
  total(square(x)).backward();  // accumulates 2x
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 36, 114}));
}

TEST(Autograd, DiamondSumsBothPaths) {
  Tensor x = leaf({3});
  Tensor y = square(x);
  Tensor a = total(y), b = total(y);
  // Two roots sharing y: gradient 2 * 2x.
  run_backward({a, b}, {Tensor(), Tensor()}, false);
  EXPECT_EQ(x.grad().item(), 12.0);
}

TEST(Autograd, GradReadyHookFiresOncePerBackwardAfterAccumulation) {
  Tensor x = leaf({1, 2});
  int calls = 0;
  double seen = 0;
  x.add_grad_ready_hook([&](Tensor& t) {
    ++calls;
    seen = t.grad().to_vector<double>()[1];
  });
  Tensor y = square(x);
  run_backward({total(y), total(y)}, {Tensor(), Tensor()}, false);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 8.0);
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor x = leaf({1});
  Tensor loss = total(square(x));
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
  Tensor l2 = total(square(x));
  l2.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_NO_THROW(l2.backward());
}

TEST(Autograd, GradientShapeMismatchIsAnError) {
  Tensor x = leaf({1, 2});
  Tensor bad = record("bad", {x}, Tensor::scalar(0.0, DType::f64), [](const std::vector<Tensor>&) {
    return std::vector<Tensor>{Tensor::zeros({3}, DType::f64)};
  });
  try {
    bad.backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  }
  Tensor y = square(x);
  EXPECT_THROW(y.backward(), ValueError);                                     // not a scalar
  EXPECT_THROW(y.backward(Tensor::ones({3}, DType::f64)), ValueError);       // wrong shape
}

TEST(Autograd, NoGradRecordsNothingAndGradLeavesDotGradAlone) {
  Tensor x = leaf({2});
  {
    NoGradGuard ng;
    EXPECT_FALSE(square(x).requires_grad());
  }
  auto g = grad({total(square(x))}, {x});
  EXPECT_EQ(g[0].item(), 4.0);
  EXPECT_FALSE(x.grad().defined());
}
