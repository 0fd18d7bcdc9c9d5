// Parameter-free activation modules: ReLU, GELU (exact erf form, or the tanh approximation).
#pragma once
#include "nn/module.h"

namespace tandem::nn {

class ReLU : public Cloneable<ReLU> {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

class GELU : public Cloneable<GELU> {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  bool tanh_approximation() const { return tanh_; }

 private:
  bool tanh_;
};

}  // namespace tandem::nn
