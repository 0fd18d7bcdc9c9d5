// LayerNorm over ops::layer_norm.
#include "nn/layers/layer_norm.h"

#include "runtime/autocast.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool autocast_output)
    : shape_(std::move(normalized_shape)), eps_(eps), affine_(elementwise_affine), autocast_output_(autocast_output) {
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
  // The dtype a low-precision op casts x's dtype to: the autocast dtype, or x's own (autocast off, f64).
  const std::optional<DType> out =
      autocast_output_ ? std::optional<DType>(autocast_target(x.dtype(), AutocastCategory::LowPrecision))
                       : std::nullopt;
  return ops::layer_norm(x, nd, affine_ ? param("weight") : Tensor(), affine_ ? param("bias") : Tensor(), eps_, out);
}

}  // namespace tandem::nn
