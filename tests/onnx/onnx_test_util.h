// The importer tests' models and references (tests/onnx/models/README.md says what each holds).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/serialization/safetensors.h"
#include "runtime/tensor.h"

namespace tandem::testing {

inline std::string onnx_model(const std::string& name) { return std::string(TANDEM_ONNX_MODELS) + "/" + name; }

inline serialization::SafetensorsContents onnx_reference(const std::string& model) {
  return serialization::load_safetensors(onnx_model(model + ".ref.safetensors"));
}

inline const Tensor& ref(const serialization::SafetensorsContents& r, const std::string& name) {
  const Tensor* t = r.find(name);
  if (t == nullptr) throw std::runtime_error("reference has no " + name);
  return *t;
}

// Asserts |got - want| <= tol * (1 + max |want|) elementwise over same-shaped tensors; returns the max
// difference (the closing note's table).
inline double expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return INFINITY;
  const std::vector<double> g = got.to(kCPU).to_vector<double>(), w = want.to_vector<double>();
  double scale = 0, diff = 0;
  for (double v : w) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < g.size(); ++i) diff = std::max(diff, std::fabs(g[i] - w[i]));
  EXPECT_LE(diff, tol * (1 + scale)) << what << ": max |tandem - reference| " << diff;
  return diff;
}

}  // namespace tandem::testing
