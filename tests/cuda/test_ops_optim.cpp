// SGD / Adam steps, sum of squares and scale on the CUDA backend vs the CPU backend.
#include "runtime/backend/optim.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class OptimOps : public BackendTest {};

TEST_P(OptimOps, SgdAndAdamStepsMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (int64_t n : edge_sizes()) {
      std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      Tensor p = random_tensor({n}, dt, 151), g = random_tensor({n}, dt, 152), buf = random_tensor({n}, dt, 153);
      Tensor dp = p.to(dev()), dg = g.to(dev()), dbuf = buf.to(dev());
      SgdHyper sh;
      sh.lr = 0.1, sh.momentum = 0.9, sh.weight_decay = 1e-2, sh.nesterov = true;
      kernels::optim_sgd_step(kCPU)(p, g, buf, sh);
      kernels::optim_sgd_step(dev())(dp, dg, dbuf, sh);
      expect_close(dp, p, ulps(dt), what + " sgd param");
      expect_close(dbuf, buf, ulps(dt), what + " sgd momentum");
      Tensor m = random_tensor({n}, dt, 154), v = random_tensor({n}, dt, 155, 0, 1);
      Tensor dm = m.to(dev()), dv = v.to(dev());
      for (bool decoupled : {false, true}) {
        AdamHyper ah = adam_hyper(1e-2, 0.9, 0.999, 1e-8, 0.01, decoupled, 3);
        kernels::optim_adam_step(kCPU)(p, g, m, v, ah);
        kernels::optim_adam_step(dev())(dp, dg, dm, dv, ah);
        expect_close(dp, p, ulps(dt), what + " adam param");
        expect_close(dm, m, ulps(dt), what + " adam m");
        expect_close(dv, v, ulps(dt), what + " adam v");
      }
    }
}

TEST_P(OptimOps, SumSquaresAndScaleMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (int64_t n : edge_sizes()) {
      Tensor x = random_tensor({n}, dt, 161);
      const double want = kernels::optim_sum_squares(kCPU)(x);
      const double got = kernels::optim_sum_squares(dev())(x.to(dev()));
      EXPECT_NEAR(got, want, 1e-12 * (std::abs(want) + 1)) << dtype_name(dt) << " n=" << n;  // f64 sums, reordered
      Tensor dx = x.to(dev());
      kernels::optim_scale(kCPU)(x, 0.37);
      kernels::optim_scale(dev())(dx, 0.37);
      expect_close(dx, x, 0, std::string(dtype_name(dt)) + " scale");
    }
}

TANDEM_BACKEND_SUITE(OptimOps);

}  // namespace
}  // namespace tandem::testing
