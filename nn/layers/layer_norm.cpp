// LayerNorm over ops::layer_norm.
#include "nn/layers/layer_norm.h"

#include "runtime/ops/norm.h"

namespace tandem::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : shape_(std::move(normalized_shape)), eps_(eps), affine_(elementwise_affine) {
  TANDEM_CHECK(!shape_.empty() && shape_numel(shape_) > 0, "LayerNorm: invalid normalized_shape {}", shape_str(shape_));
  if (affine_) {
    register_parameter("weight", Tensor::ones(shape_));
    register_parameter("bias", Tensor::zeros(shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  const int64_t nd = static_cast<int64_t>(shape_.size());
  bool ok = x.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = x.size(x.dim() - nd + i) == shape_[static_cast<size_t>(i)];
  TANDEM_CHECK(ok, "LayerNorm({}): input has shape {}; its trailing dims must be {}", shape_str(shape_),
               shape_str(x.shape()), shape_str(shape_));
  return ops::layer_norm(x, nd, affine_ ? param("weight") : Tensor(), affine_ ? param("bias") : Tensor(), eps_);
}

}  // namespace tandem::nn
