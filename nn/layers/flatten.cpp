// Flatten over ops::flatten.
#include "nn/layers/flatten.h"

#include "runtime/ops/shape.h"

namespace tandem::nn {

Tensor Flatten::forward(const Tensor& x) { return ops::flatten(x, start_, end_); }

}  // namespace tandem::nn
