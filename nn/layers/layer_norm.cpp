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

void LayerNorm::check_input(const Tensor& x) const {
  const int64_t nd = static_cast<int64_t>(shape_.size());
  bool ok = x.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = x.size(x.dim() - nd + i) == shape_[static_cast<size_t>(i)];
  TANDEM_CHECK(ok, "LayerNorm({}): input has shape {}; its trailing dims must be {}", shape_str(shape_),
               shape_str(x.shape()), shape_str(shape_));
}

// The dtype a low-precision op casts x's dtype to: the autocast dtype, or x's own (autocast off, f64).
std::optional<DType> LayerNorm::output_dtype(const Tensor& x) const {
  if (!autocast_output_) return std::nullopt;
  return autocast_target(x.dtype(), AutocastCategory::LowPrecision);
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_input(x);
  return ops::layer_norm(x, static_cast<int64_t>(shape_.size()), affine_ ? param("weight") : Tensor(),
                         affine_ ? param("bias") : Tensor(), eps_, output_dtype(x));
}

ops::AddLayerNorm LayerNorm::forward_after_add(const Tensor& x, const Tensor& branch) {
  check_input(x);
  return ops::add_layer_norm(x, branch, static_cast<int64_t>(shape_.size()), affine_ ? param("weight") : Tensor(),
                             affine_ ? param("bias") : Tensor(), eps_, output_dtype(x));
}

}  // namespace tandem::nn
