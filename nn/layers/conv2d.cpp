// Conv2d layer over ops::conv2d.
#include "nn/layers/conv2d.h"

#include <cmath>

#include "nn/init.h"
#include "runtime/ops/conv.h"

namespace tandem::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding,
               bool bias, Generator& gen)
    : in_(in_channels), out_(out_channels), k_(kernel_size), stride_(stride), pad_(padding), has_bias_(bias) {
  TANDEM_CHECK(in_ > 0 && out_ > 0 && k_ > 0 && stride_ > 0 && pad_ >= 0,
               "Conv2d: invalid arguments in_channels {}, out_channels {}, kernel_size {}, stride {}, padding {}",
               in_, out_, k_, stride_, pad_);
  register_parameter("weight", Tensor::empty({out_, in_, k_, k_}));
  if (has_bias_) register_parameter("bias", Tensor::empty({out_}));
  reset_parameters(gen);
}

void Conv2d::reset_parameters(Generator& gen) {
  init::kaiming_uniform_(param("weight"), std::sqrt(5.0), gen);
  if (has_bias_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_ * k_ * k_));
    init::uniform_(param("bias"), -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() == 4 && x.size(1) == in_, "Conv2d({}, {}): input has shape {}; expected [N, {}, H, W]", in_,
               out_, shape_str(x.shape()), in_);
  return ops::conv2d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), {stride_, stride_}, {pad_, pad_});
}

}  // namespace tandem::nn
