// Per-layer timing of a Sequential model's training step: each layer's forward and backward run
// on their own (median of repeats), then the loss and the optimizer step, as JSON lines. Tells
// which op holds a model below its share of the peak.
#pragma once
#include "nn/layers/sequential.h"
#include "nn/optim/optimizer.h"
#include "runtime/tensor.h"

namespace tandem::bench {

void profile_layers(nn::Sequential& model, nn::Optimizer& opt, const Tensor& x, const Tensor& y, int repeats);

}  // namespace tandem::bench
