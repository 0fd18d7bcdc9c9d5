// Activation modules over ops::relu / ops::gelu.
#include "nn/layers/activation.h"

#include "runtime/ops/elementwise.h"

namespace tandem::nn {

Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }
Tensor GELU::forward(const Tensor& x) { return ops::gelu(x, tanh_); }

}  // namespace tandem::nn
