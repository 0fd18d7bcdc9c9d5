// Finite-difference gradient check: the analytic gradient of <fn(inputs), w> (w a fixed random
// weight tensor) against central differences, in f64.
#pragma once
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/autograd.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::testing {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Random f64 leaf requiring grad, values uniform in [low, high).
inline Tensor random_leaf(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0,
                          Device device = kCPU) {
  Generator gen(seed);
  Tensor t = rand_uniform(shape, low, high, gen, DType::f64, device);
  t.set_requires_grad(true);
  return t;
}

// Checks every input that requires grad; reports the worst element through gtest.
inline void expect_gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                             double atol = 1e-6, double rtol = 1e-4) {
  Tensor out = fn(inputs);
  ASSERT_TRUE(out.requires_grad()) << "output does not require grad";
  Generator gen(1234);
  Tensor w = rand_uniform(out.shape(), -1.0, 1.0, gen, out.dtype(), out.device());
  std::vector<double> wv = w.to_vector<double>();
  auto weighted = [&](const std::vector<Tensor>& in) {
    NoGradGuard ng;
    std::vector<double> o = fn(in).to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * wv[i];
    return s;
  };
  std::vector<Tensor> wanted;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) wanted.push_back(t);
  std::vector<Tensor> analytic = grad({out}, wanted, {w});

  size_t k = 0;
  for (size_t idx = 0; idx < inputs.size(); ++idx) {
    const Tensor& x = inputs[idx];
    if (!x.requires_grad()) continue;
    ASSERT_EQ(x.dtype(), DType::f64) << "gradcheck inputs must be f64";
    std::vector<double> ga = analytic[k++].to_vector<double>();
    ASSERT_EQ(static_cast<int64_t>(ga.size()), x.numel());
    double* data = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double orig = data[i];
      data[i] = orig + eps;
      double plus = weighted(inputs);
      data[i] = orig - eps;
      double minus = weighted(inputs);
      data[i] = orig;
      double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(ga[static_cast<size_t>(i)], numeric, atol + rtol * std::abs(numeric))
          << "input " << idx << " element " << i;
    }
  }
}

// Elementwise closeness with a message naming the first bad element.
inline void expect_close(const Tensor& actual, const std::vector<double>& expected, double atol = 1e-5,
                         double rtol = 1e-5) {
  std::vector<double> a = actual.to_vector<double>();
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], expected[i], atol + rtol * std::abs(expected[i])) << "element " << i;
}

inline void expect_close(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-5) {
  ASSERT_EQ(actual.shape(), expected.shape()) << shape_str(actual.shape()) << " vs " << shape_str(expected.shape());
  expect_close(actual, expected.to_vector<double>(), atol, rtol);
}

}  // namespace tandem::testing
