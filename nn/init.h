// Parameter initialisation as torch.nn.init, drawing from a tandem::Generator (one draw per call,
// so the values depend only on the seed and the order of calls). Values are written in place
// (existing handles see them) without recording autograd history.
#pragma once
#include <utility>

#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::nn::init {

// (fan_in, fan_out) of a weight [out, in, k...]: fan_in = in * prod(k), fan_out = out * prod(k).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight);

void uniform_(Tensor& t, double low, double high, Generator& gen);
void normal_(Tensor& t, double mean, double stddev, Generator& gen);
void constant_(Tensor& t, double value);
inline void zeros_(Tensor& t) { constant_(t, 0.0); }
inline void ones_(Tensor& t) { constant_(t, 1.0); }

// U(-bound, bound), bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)) (leaky_relu gain).
// PyTorch's Linear/Conv default is a = sqrt(5): bound = 1 / sqrt(fan_in).
void kaiming_uniform_(Tensor& t, double a, Generator& gen);
// N(0, std), std = gain / sqrt(fan_in).
void kaiming_normal_(Tensor& t, double a, Generator& gen);
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(Tensor& t, Generator& gen, double gain = 1.0);

}  // namespace tandem::nn::init
