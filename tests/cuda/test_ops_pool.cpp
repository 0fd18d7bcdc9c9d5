// max and average pooling, forward and backward, on the CUDA backend vs the CPU.
#include "runtime/backend/pool.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

kernels::Pool2dGeometry pool_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s,
                                      int64_t p) {
  kernels::Pool2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.kh = k, g.kw = k, g.sh = s, g.sw = s, g.ph = p, g.pw = p;
  g.ho = (h + 2 * p - k) / s + 1;
  g.wo = (w + 2 * p - k) / s + 1;
  return g;
}

class PoolOps : public BackendTest {};

TEST_P(PoolOps, PoolingForwardBackwardMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (auto g : {pool_geometry(2, 3, 8, 8, 2, 2, 0), pool_geometry(1, 2, 7, 9, 3, 2, 1), pool_geometry(1, 1, 1, 1, 1, 1, 0),
                   pool_geometry(3, 2, 5, 5, 3, 1, 1), pool_geometry(0, 2, 4, 4, 2, 2, 0)}) {
      Shape xs{g.n, g.c, g.h, g.w}, ys{g.n, g.c, g.ho, g.wo};
      Tensor x = random_tensor(xs, dt, 101, -3, 3), dy = random_tensor(ys, dt, 102);
      std::string what = std::string(dtype_name(dt)) + " " + shape_str(xs) + " k" + std::to_string(g.kh);
      Tensor y = Tensor::empty(ys, dt), arg = Tensor::empty(ys, DType::i32);
      Tensor gy = Tensor::empty(ys, dt, dev()), garg = Tensor::empty(ys, DType::i32, dev());
      kernels::max_pool2d_forward(kCPU)(x, y, arg, g);
      kernels::max_pool2d_forward(dev())(x.to(dev()), gy, garg, g);
      expect_close(gy, y, 0, what + " max");
      expect_close(garg, arg, 0, what + " argmax");
      Tensor dx = Tensor::empty(xs, dt), gdx = Tensor::empty(xs, dt, dev());
      kernels::max_pool2d_backward(kCPU)(dy, arg, dx, g);
      kernels::max_pool2d_backward(dev())(dy.to(dev()), arg.to(dev()), gdx, g);
      expect_close(gdx, dx, 0, what + " max backward");
      kernels::avg_pool2d_forward(kCPU)(x, y, g);
      kernels::avg_pool2d_forward(dev())(x.to(dev()), gy, g);
      expect_close(gy, y, 0, what + " avg");
      kernels::avg_pool2d_backward(kCPU)(dy, dx, g);
      kernels::avg_pool2d_backward(dev())(dy.to(dev()), gdx, g);
      expect_close(gdx, dx, ulps(dt), what + " avg backward");
    }
}

TANDEM_BACKEND_SUITE(PoolOps);

}  // namespace
}  // namespace tandem::testing
