// torch.nn.init equivalents over tandem's Philox generator.
#include "nn/init.h"

#include <cmath>

#include "runtime/autograd.h"

namespace tandem::nn::init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& w) {
  TANDEM_CHECK(w.dim() >= 2, "fan_in_and_fan_out: needs a tensor with at least 2 dims, got shape {}",
               shape_str(w.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
  return {w.size(1) * receptive, w.size(0) * receptive};
}

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  NoGradGuard no_grad;
  t.copy_(rand_uniform(t.shape(), low, high, gen, t.dtype(), t.device()));
}

void normal_(Tensor& t, double mean, double stddev, Generator& gen) {
  NoGradGuard no_grad;
  t.copy_(rand_normal(t.shape(), mean, stddev, gen, t.dtype(), t.device()));
}

void constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
}

void kaiming_uniform_(Tensor& t, double a, Generator& gen) {
  const double fan_in = static_cast<double>(fan_in_and_fan_out(t).first);
  TANDEM_CHECK(fan_in > 0, "kaiming_uniform_: zero fan_in for shape {}", shape_str(t.shape()));
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / fan_in);
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(Tensor& t, double a, Generator& gen) {
  const double fan_in = static_cast<double>(fan_in_and_fan_out(t).first);
  TANDEM_CHECK(fan_in > 0, "kaiming_normal_: zero fan_in for shape {}", shape_str(t.shape()));
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  normal_(t, 0.0, gain / std::sqrt(fan_in), gen);
}

void xavier_uniform_(Tensor& t, Generator& gen, double gain) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(t, -bound, bound, gen);
}

}  // namespace tandem::nn::init
