// Small helpers for the op tests: tensors from reference arrays, evenly spaced values, ValueError
// expectations.
#pragma once
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/error.h"
#include "runtime/ops.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {

inline Tensor ref_tensor(const std::vector<double>& v, const Shape& shape, DType dtype = DType::f64) {
  return Tensor::from_vector(v, shape, dtype);
}

// n values from lo to hi (both included), evenly spaced.
inline std::vector<double> linspace(double lo, double hi, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}

// Runs f and expects a ValueError whose message contains every needle.
template <class F>
void expect_value_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

inline Tensor leaf(const Tensor& t) {
  Tensor c = t.clone();
  c.set_requires_grad(true);
  return c;
}

}  // namespace tandem::testing
