// permute / copy_block, dropout, embedding, pooling, batch/layer norm and convolution on the CUDA
// backend vs the CPU backend.
#include "kernels/conv.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "kernels/pool.h"
#include "kernels/shape.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class NnOps : public BackendTest {};

TEST_P(NnOps, PermuteAndCopyBlockMatchCpuExactly) {
  struct Case { Shape s; std::vector<int64_t> perm; };
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::u8})
    for (const Case& c : {Case{{}, {}}, Case{{0, 3}, {1, 0}}, Case{{1}, {0}}, Case{{7, 33}, {1, 0}},
                          Case{{2, 3, 5, 7}, {3, 1, 0, 2}}, Case{{33, 1, 9}, {2, 0, 1}}}) {
      Tensor src = random_tensor(c.s, dt, 71, 0, 100);
      Shape out_shape;
      for (int64_t p : c.perm) out_shape.push_back(c.s[static_cast<size_t>(p)]);
      Tensor want = Tensor::empty(out_shape, dt), got = Tensor::empty(out_shape, dt, dev());
      kernels::permute(kCPU)(src, want, c.perm);
      kernels::permute(dev())(src.to(dev()), got, c.perm);
      expect_close(got, want, 0, std::string(dtype_name(dt)) + " permute " + shape_str(c.s));
    }
  Tensor src = random_tensor({5, 9}, DType::f32, 72);
  Tensor want = Tensor::zeros({5, 20}), got = Tensor::zeros({5, 20}, DType::f32, dev());
  kernels::copy_block(kCPU)(src, 2, 9, want, 3, 20, 5, 7);
  kernels::copy_block(dev())(src.to(dev()), 2, 9, got, 3, 20, 5, 7);
  expect_close(got, want, 0, "copy_block");
}

TEST_P(NnOps, DropoutDrawsTheSameMaskAsCpu) {
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

TEST_P(NnOps, EmbeddingForwardBackwardMatchCpuExactly) {
  for (DType it : {DType::i32, DType::i64})
    for (auto [n, V, D] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 3, 4}, {1, 1, 1}, {40, 7, 33}, {300, 50, 5}}) {
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = (i * i + 3) % V;  // repeats
      Tensor indices = Tensor::from_vector(idx, {n}, it);
      Tensor weight = random_tensor({V, D}, DType::f32, 91), dy = random_tensor({n, D}, DType::f32, 92);
      Tensor want = Tensor::empty({n, D}), got = Tensor::empty({n, D}, DType::f32, dev());
      kernels::embedding_forward(kCPU)(indices, weight, want);
      kernels::embedding_forward(dev())(indices.to(dev()), weight.to(dev()), got);
      expect_close(got, want, 0, "embedding forward");
      Tensor dw = Tensor::empty({V, D}), ddw = Tensor::empty({V, D}, DType::f32, dev());
      kernels::embedding_backward(kCPU)(indices, dy, dw);
      kernels::embedding_backward(dev())(indices.to(dev()), dy.to(dev()), ddw);
      expect_close(ddw, dw, 0, "embedding backward (same order of additions)");
    }
  Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 5}, {2}).to(dev());
  Tensor out = Tensor::empty({2, 3}, DType::f32, dev());
  EXPECT_THROW(kernels::embedding_forward(dev())(bad, Tensor::zeros({4, 3}, DType::f32, dev()), out), ValueError);
}

kernels::Pool2dGeometry pool_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t p) {
  kernels::Pool2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.kh = k, g.kw = k, g.sh = s, g.sw = s, g.ph = p, g.pw = p;
  g.ho = (h + 2 * p - k) / s + 1;
  g.wo = (w + 2 * p - k) / s + 1;
  return g;
}

TEST_P(NnOps, PoolingForwardBackwardMatchCpu) {
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

TEST_P(NnOps, BatchNormStagesMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    // The larger shapes split each channel over several blocks (rows of 81 and of 1 element).
    for (Shape xs : {Shape{4, 3}, Shape{2, 5, 3, 7}, Shape{1, 1}, Shape{3, 2, 33}, Shape{17, 4, 1, 1}, Shape{8, 3, 9, 9},
                     Shape{300, 2}}) {
      const int64_t C = xs[1], count = shape_numel(xs) / C;
      const DType sd = dt == DType::f64 ? DType::f64 : DType::f32;
      const double rtol = dt == DType::bf16 ? 1e-2 : 1e-5;
      std::string what = std::string(dtype_name(dt)) + " " + shape_str(xs);
      Tensor x = random_tensor(xs, dt, 111, -2, 3), dy = random_tensor(xs, dt, 112);
      Tensor w = random_tensor({C}, dt, 113, 0.5, 1.5), b = random_tensor({C}, dt, 114);
      // (1) statistics
      Tensor mean = Tensor::empty({C}, sd), m2 = Tensor::empty({C}, sd);
      Tensor dmean = Tensor::empty({C}, sd, dev()), dm2 = Tensor::empty({C}, sd, dev());
      kernels::batch_norm_stats(kCPU)(x, mean, m2);
      kernels::batch_norm_stats(dev())(x.to(dev()), dmean, dm2);
      expect_close(dmean, mean, 1e-5, what + " mean");
      expect_close(dm2, m2, 1e-5, what + " m2");
      // (1b) finalize with running statistics in x's dtype; from the CPU's stats (exact on SIM)
      Tensor invstd = Tensor::empty({C}, sd), rm = Tensor::zeros({C}, dt), rv = Tensor::ones({C}, dt);
      Tensor dinvstd = Tensor::empty({C}, sd, dev()), drm = rm.to(dev()), drv = rv.to(dev());
      kernels::batch_norm_finalize(kCPU)(mean, m2, count, 1e-5, 0.1, invstd, rm, rv);
      kernels::batch_norm_finalize(dev())(mean.to(dev()), m2.to(dev()), count, 1e-5, 0.1, dinvstd, drm, drv);
      expect_close(dinvstd, invstd, tol(0), what + " invstd");
      expect_close(drm, rm, tol(0, ulps(dt)), what + " running_mean");
      expect_close(drv, rv, tol(0, ulps(dt)), what + " running_var");
      // (2) apply: exact on SIM given the same statistics
      Tensor y = Tensor::empty(xs, dt), gy = Tensor::empty(xs, dt, dev());
      kernels::batch_norm_apply(kCPU)(x, mean, invstd, w, b, y);
      kernels::batch_norm_apply(dev())(x.to(dev()), mean.to(dev()), invstd.to(dev()), w.to(dev()), b.to(dev()), gy);
      expect_close(gy, y, tol(0, ulps(dt)), what + " apply");
      // (3) backward reduce
      Tensor sdy = Tensor::empty({C}, sd), sdx = Tensor::empty({C}, sd), gw = Tensor::empty({C}, dt), gb = Tensor::empty({C}, dt);
      Tensor dsdy = Tensor::empty({C}, sd, dev()), dsdx = Tensor::empty({C}, sd, dev());
      Tensor dgw = Tensor::empty({C}, dt, dev()), dgb = Tensor::empty({C}, dt, dev());
      kernels::batch_norm_backward_reduce(kCPU)(dy, x, mean, invstd, sdy, sdx, gw, gb);
      kernels::batch_norm_backward_reduce(dev())(dy.to(dev()), x.to(dev()), mean.to(dev()), invstd.to(dev()), dsdy, dsdx, dgw, dgb);
      expect_close(dsdy, sdy, 1e-5, what + " sum_dy");
      expect_close(dsdx, sdx, 1e-4, what + " sum_dy_xmu");
      expect_close(dgw, gw, rtol * 10, what + " grad_weight");
      expect_close(dgb, gb, rtol, what + " grad_bias");
      // (4) backward elementwise, batch statistics and eval
      for (bool train : {true, false}) {
        Tensor dx = Tensor::empty(xs, dt), gdx = Tensor::empty(xs, dt, dev());
        Tensor a = train ? sdy : Tensor(), bb = train ? sdx : Tensor();
        Tensor da = train ? sdy.to(dev()) : Tensor(), dbb = train ? sdx.to(dev()) : Tensor();
        kernels::batch_norm_backward_elemt(kCPU)(dy, x, mean, invstd, w, a, bb, count, dx);
        kernels::batch_norm_backward_elemt(dev())(dy.to(dev()), x.to(dev()), mean.to(dev()), invstd.to(dev()), w.to(dev()),
                                                  da, dbb, count, gdx);
        expect_close(gdx, dx, ulps(dt), what + (train ? " dx" : " dx eval"));
      }
    }
}

TEST_P(NnOps, LayerNormMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (auto [M, D] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {1, 1}, {4, 7}, {3, 33}, {2, 300}, {40, 3}})
      for (bool affine : {true, false}) {
        const DType sd = dt == DType::f64 ? DType::f64 : DType::f32;
        const double rtol = dt == DType::f16 ? 2e-3 : 1e-5;
        std::string what = std::string(dtype_name(dt)) + " [" + std::to_string(M) + "," + std::to_string(D) + "]";
        Tensor x = random_tensor({M, D}, dt, 121, -2, 3), dy = random_tensor({M, D}, dt, 122);
        Tensor w = affine ? random_tensor({D}, dt, 123, 0.5, 1.5) : Tensor(), b = affine ? random_tensor({D}, dt, 124) : Tensor();
        Tensor dw_ = affine ? w.to(dev()) : Tensor(), db_ = affine ? b.to(dev()) : Tensor();
        Tensor y = Tensor::empty({M, D}, dt), mean = Tensor::empty({M}, sd), rstd = Tensor::empty({M}, sd);
        Tensor gy = Tensor::empty({M, D}, dt, dev()), gmean = Tensor::empty({M}, sd, dev()), grstd = Tensor::empty({M}, sd, dev());
        kernels::layer_norm_forward(kCPU)(x, w, b, 1e-5, y, mean, rstd);
        kernels::layer_norm_forward(dev())(x.to(dev()), dw_, db_, 1e-5, gy, gmean, grstd);
        expect_close(gy, y, rtol * 10, what + " y");
        expect_close(gmean, mean, 1e-5, what + " mean");
        expect_close(grstd, rstd, 1e-5, what + " rstd");
        Tensor dx = Tensor::empty({M, D}, dt), gdx = Tensor::empty({M, D}, dt, dev());
        Tensor gw = affine ? Tensor::empty({D}, dt) : Tensor(), gb = affine ? Tensor::empty({D}, dt) : Tensor();
        Tensor ggw = affine ? Tensor::empty({D}, dt, dev()) : Tensor(), ggb = affine ? Tensor::empty({D}, dt, dev()) : Tensor();
        kernels::layer_norm_backward(kCPU)(dy, x, mean, rstd, w, dx, gw, gb);
        kernels::layer_norm_backward(dev())(dy.to(dev()), x.to(dev()), mean.to(dev()), rstd.to(dev()), dw_, gdx, ggw, ggb);
        expect_close(gdx, dx, rtol * 10, what + " dx");
        if (affine) {
          expect_close(ggw, gw, ulps(dt), what + " dweight (CPU's order)");
          expect_close(ggb, gb, ulps(dt), what + " dbias (CPU's order)");
        }
      }
}

kernels::Conv2dGeometry conv_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t s,
                                      int64_t p) {
  kernels::Conv2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.o = o, g.kh = k, g.kw = k, g.sh = s, g.sw = s, g.ph = p, g.pw = p;
  g.ho = (h + 2 * p - k) / s + 1;
  g.wo = (w + 2 * p - k) / s + 1;
  return g;
}

TEST_P(NnOps, Im2colCol2imMatchCpuExactly) {
  for (auto g : {conv_geometry(2, 3, 6, 7, 4, 3, 1, 1), conv_geometry(1, 2, 9, 8, 3, 3, 2, 0), conv_geometry(1, 1, 1, 1, 1, 1, 1, 0),
                 conv_geometry(2, 2, 5, 5, 2, 2, 2, 1)}) {
    Tensor x = random_tensor({g.n, g.c, g.h, g.w}, DType::f32, 131);
    Tensor cols = Tensor::empty({g.k(), g.n * g.l()}), dcols = Tensor::empty({g.k(), g.n * g.l()}, DType::f32, dev());
    Tensor dx = x.to(dev());
    kernels::im2col(kCPU)(kCPU, DType::f32, g, x.data_ptr(), cols.data_ptr());
    kernels::im2col(dev())(dev(), DType::f32, g, dx.data_ptr(), dcols.data_ptr());
    expect_close(dcols, cols, 0, "im2col");
    Tensor back = Tensor::empty(x.shape()), dback = Tensor::empty(x.shape(), DType::f32, dev());
    kernels::col2im(kCPU)(kCPU, DType::f32, g, cols.data_ptr(), back.data_ptr());
    kernels::col2im(dev())(dev(), DType::f32, g, dcols.data_ptr(), dback.data_ptr());
    expect_close(dback, back, 0, "col2im");
  }
}

TEST_P(NnOps, Conv2dForwardBackwardMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (auto g : {conv_geometry(2, 3, 6, 7, 4, 3, 1, 1), conv_geometry(3, 2, 9, 8, 5, 3, 2, 0), conv_geometry(1, 1, 1, 1, 1, 1, 1, 0),
                   conv_geometry(0, 2, 4, 4, 3, 3, 1, 1)}) {
      const double rtol = dt == DType::f16 ? 2e-3 : 1e-5;
      std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(g.n) + " c=" + std::to_string(g.c);
      Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.kh, g.kw}, ys{g.n, g.o, g.ho, g.wo};
      Tensor x = random_tensor(xs, dt, 141), w = random_tensor(ws, dt, 142), b = random_tensor({g.o}, dt, 143);
      Tensor dy = random_tensor(ys, dt, 144);
      Tensor y = Tensor::empty(ys, dt), gy = Tensor::empty(ys, dt, dev());
      kernels::conv2d_forward(kCPU)(x, w, b, y, g);
      kernels::conv2d_forward(dev())(x.to(dev()), w.to(dev()), b.to(dev()), gy, g);
      expect_close(gy, y, rtol, what + " y");
      Tensor dx = Tensor::empty(xs, dt), gdx = Tensor::empty(xs, dt, dev());
      kernels::conv2d_backward_input(kCPU)(dy, w, dx, g);
      kernels::conv2d_backward_input(dev())(dy.to(dev()), w.to(dev()), gdx, g);
      expect_close(gdx, dx, rtol, what + " dx");
      Tensor dw = Tensor::empty(ws, dt), db = Tensor::empty({g.o}, dt);
      Tensor gdw = Tensor::empty(ws, dt, dev()), gdb = Tensor::empty({g.o}, dt, dev());
      kernels::conv2d_backward_weight(kCPU)(x, dy, dw, db, g);
      kernels::conv2d_backward_weight(dev())(x.to(dev()), dy.to(dev()), gdw, gdb, g);
      expect_close(gdw, dw, rtol, what + " dw");
      expect_close(gdb, db, rtol, what + " db");
    }
}

TANDEM_BACKEND_SUITE(NnOps);

}  // namespace
}  // namespace tandem::testing
