// dropout entry: one Philox draw (seed, offset) per call; backward re-derives the same mask from the
// captured (seed, offset) instead of storing it.
#include "runtime/autograd.h"
#include "runtime/backend/dropout.h"
#include "runtime/ops/dropout.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  detail::check_defined(x, "dropout", "input");
  TANDEM_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability must be in [0, 1], got {}", p);
  if (!training) return x;
  detail::check_floating("dropout", x);
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels::dropout_apply(x.device())(x, y, p, seed, offset);
  if (!needs_grad({&x})) return y;
  return record("DropoutBackward", {x}, y, [p, seed, offset](const std::vector<Tensor>& grads) {
    const Tensor& dy = grads[0];
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    kernels::dropout_apply(dy.device())(dy, dx, p, seed, offset);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace tandem::ops
