// Shared helpers of the tests/ops_nn tests: tensors from reference vectors, gradients of sum(y * r).
#pragma once
#include <vector>

#include "runtime/autograd.h"
#include "tests/reference/ops_b_values.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {

inline Tensor ref(const std::vector<double>& v, const Shape& shape, DType dtype = DType::f64, bool rg = false) {
  Tensor t = Tensor::from_vector(v, shape, dtype);
  if (rg) t.set_requires_grad(true);
  return t;
}

// Gradients of sum(y * r) w.r.t. inputs, r from the reference values.
inline std::vector<Tensor> grads_of(const Tensor& y, const std::vector<Tensor>& inputs, const std::vector<double>& r) {
  return grad({y}, inputs, {ref(r, y.shape(), y.dtype())});
}

// Expects a ValueError whose message contains every one of `parts`.
template <class F>
void expect_value_error(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace tandem::testing
