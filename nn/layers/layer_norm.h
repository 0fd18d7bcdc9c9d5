// LayerNorm over the trailing `normalized_shape` dims; weight 1 and bias 0 of that shape.
#pragma once
#include "nn/module.h"

namespace tandem::nn {

class LayerNorm : public Cloneable<LayerNorm> {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  const Shape& normalized_shape() const { return shape_; }

 private:
  Shape shape_;
  double eps_;
  bool affine_;
};

}  // namespace tandem::nn
