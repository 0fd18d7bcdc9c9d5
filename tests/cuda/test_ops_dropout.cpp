// dropout masks (one Philox draw) on the CUDA backend vs the CPU, bit for bit.
#include "runtime/backend/dropout.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class DropoutOps : public BackendTest {};

TEST_P(DropoutOps, DropoutDrawsTheSameMaskAsCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (int64_t n : edge_sizes())
      for (double p : {0.0, 0.3, 0.9}) {
        Tensor x = random_tensor({n}, dt, 81);
        Tensor want = Tensor::empty({n}, dt), got = Tensor::empty({n}, dt, dev());
        kernels::dropout_apply(kCPU)(x, want, p, 1234, 56);
        kernels::dropout_apply(dev())(x.to(dev()), got, p, 1234, 56);
        expect_close(got, want, 0, std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      }
}

TANDEM_BACKEND_SUITE(DropoutOps);

}  // namespace
}  // namespace tandem::testing
