// Linear: y = x W^T + b, weight [out, in], bias [out]; PyTorch's default init
// (weight and bias U(-1/sqrt(in), 1/sqrt(in)), weight drawn first).
#pragma once
#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

class Linear : public Cloneable<Linear> {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;  // [..., in] -> [..., out]
  std::string type_name() const override { return "Linear"; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  // Redraws the parameters as at construction.
  void reset_parameters(Generator& gen);

 private:
  int64_t in_, out_;
  bool has_bias_;
};

}  // namespace tandem::nn
