// Dropout.
#pragma once
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::ops {

// Inverted dropout: zero with probability p, scale survivors by 1/(1-p); identity when !training.
// The mask comes from one Philox draw of gen (so recomputation with the same offset reproduces it).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

}  // namespace tandem::ops
