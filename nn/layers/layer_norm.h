// LayerNorm over the trailing `normalized_shape` dims; weight 1 and bias 0 of that shape.
#pragma once
#include "nn/module.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

class LayerNorm : public Cloneable<LayerNorm> {
 public:
  // autocast_output: under autocast, the output comes in the autocast dtype (computed in f32, rounded
  // once), for a LayerNorm whose output feeds only low-precision ops (a GPT block's linears): what
  // the next op would cast it to anyway, without the cast's launch and f32 round trip.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool autocast_output = false);
  Tensor forward(const Tensor& x) override;
  // x + branch and this LayerNorm of the sum in one op (ops::add_layer_norm): a pre-LayerNorm
  // transformer's residual add and the next LayerNorm. Returns {sum, forward(sum)'s values}.
  ops::AddLayerNorm forward_after_add(const Tensor& x, const Tensor& branch);
  std::string type_name() const override { return "LayerNorm"; }
  const Shape& normalized_shape() const { return shape_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return affine_; }

 private:
  Shape shape_;
  double eps_;
  bool affine_;
  bool autocast_output_;

  void check_input(const Tensor& x) const;
  std::optional<DType> output_dtype(const Tensor& x) const;
};

}  // namespace tandem::nn
