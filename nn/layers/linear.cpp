// Linear layer over ops::linear.
#include "nn/layers/linear.h"

#include <cmath>

#include "nn/init.h"
#include "runtime/ops/matmul.h"

namespace tandem::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  TANDEM_CHECK(in_features > 0 && out_features > 0, "Linear: in_features ({}) and out_features ({}) must be > 0",
               in_features, out_features);
  register_parameter("weight", Tensor::empty({out_, in_}));
  if (has_bias_) register_parameter("bias", Tensor::empty({out_}));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator& gen) {
  init::kaiming_uniform_(param("weight"), std::sqrt(5.0), gen);
  if (has_bias_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
    init::uniform_(param("bias"), -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == in_, "Linear({}, {}): input has shape {}; its last dim must be {}",
               in_, out_, shape_str(x.shape()), in_);
  return ops::linear(x, param("weight"), has_bias_ ? param("bias") : Tensor());
}

}  // namespace tandem::nn
