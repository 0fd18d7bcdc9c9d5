// Dropout over ops::dropout.
#include "nn/layers/dropout.h"

#include "runtime/ops/dropout.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

Dropout::Dropout(double p, Generator& gen) : p_(p), gen_(&gen) {
  TANDEM_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability {} must be in [0, 1]", p);
}

Tensor Dropout::forward(const Tensor& x) { return ops::dropout(x, p_, is_training(), *gen_); }

}  // namespace tandem::nn
