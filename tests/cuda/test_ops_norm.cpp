// batch norm (statistics, finalize, apply, backward) and layer norm on the CUDA backend vs the CPU
// backend.
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/norm.h"
#include "runtime/ops.h"
#include "runtime/ops/shape.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class NormOps : public BackendTest {};

kernels::LayerNormGradAdds adds_params() {
  kernels::LayerNormGradAdds a;
  a.params = true;
  return a;
}
kernels::LayerNormGradAdds adds_dx() {
  kernels::LayerNormGradAdds a;
  a.dx = true;
  return a;
}

TEST_P(NormOps, BatchNormStagesMatchCpu) {
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

// Rows up to 8192 go a warp each, in 16-byte packs where D and the rows allow (768: GPT-2's width;
// 33, 7, 70 take one element a load); 9000 takes the block-per-row kernels. Packed rows up to 1024
// are held in registers, 2 to 8 packs a lane in the one-pass backward (64, 300, 768 and 1000 take
// 2, 4, 6 and 8 f32 packs; 1000 is 4 full bf16 packs); 2048 takes the loops over the row.
TEST_P(NormOps, LayerNormMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (auto [M, D] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 5}, {1, 1}, {4, 7}, {3, 33}, {2, 300}, {40, 3}, {300, 70}, {5, 768}, {9, 64}, {2, 9000},
             {7, 1000}, {3, 2048}, {2100, 24}})  // more rows than the one-pass backward's grid has warps
      for (bool affine : {true, false}) {
        const DType sd = dt == DType::f64 ? DType::f64 : DType::f32;
        const double rtol = dt == DType::bf16 ? 1e-2 : dt == DType::f16 ? 2e-3 : 1e-5;
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
        kernels::layer_norm_backward(kCPU)(dy, x, mean, rstd, w, dx, gw, gb, {});
        kernels::layer_norm_backward(dev())(dy.to(dev()), x.to(dev()), mean.to(dev()), rstd.to(dev()), dw_, gdx, ggw, ggb,
                                            {});
        expect_close(gdx, dx, rtol * 10, what + " dx");
        if (affine) {
          // Rows are summed in splits on the GPU (another order than the CPU's): rounding apart.
          expect_close(ggw, gw, rtol * 10, what + " dweight");
          expect_close(ggb, gb, rtol * 10, what + " dbias");
          // The parameters' gradients alone (no dx): the column-sum kernels instead of the one pass.
          Tensor none, ow = Tensor::empty({D}, dt, dev()), ob = Tensor::empty({D}, dt, dev());
          kernels::layer_norm_backward(dev())(dy.to(dev()), x.to(dev()), mean.to(dev()), rstd.to(dev()), dw_, none, ow,
                                              ob, {});
          expect_close(ow, gw, rtol * 10, what + " dweight without dx");
          expect_close(ob, gb, rtol * 10, what + " dbias without dx");
        }
      }
}

// y narrower than x (bf16/f16 for f32 x, a LayerNorm feeding a low-precision op) and a dy of that
// dtype, read and written by the kernels directly: the values of the f32 kernels followed by a cast
// (y) and preceded by one (dy), to an FMA's rounding (the host compiler contracts each kernel
// instantiation on its own under the emulator), on the one-pass backward (768, 24), the warp kernels with one
// element a load (70) and the block-per-row kernels, which widen dy first (9000).
TEST_P(NormOps, LayerNormNarrowOutputEqualsCastOfF32) {
  for (DType nd : {DType::bf16, DType::f16})
    for (auto [M, D] : std::vector<std::pair<int64_t, int64_t>>{{5, 768}, {300, 70}, {2, 9000}, {2100, 24}, {0, 5}})
      for (bool affine : {true, false}) {
        std::string what = std::string(dtype_name(nd)) + " [" + std::to_string(M) + "," + std::to_string(D) + "]";
        Tensor x = random_tensor({M, D}, DType::f32, 131, -2, 3).to(dev());
        Tensor w = affine ? random_tensor({D}, DType::f32, 133, 0.5, 1.5).to(dev()) : Tensor();
        Tensor b = affine ? random_tensor({D}, DType::f32, 134).to(dev()) : Tensor();
        Tensor dyn = ops::cast(random_tensor({M, D}, DType::f32, 132), nd).to(dev());
        Tensor y32 = Tensor::empty({M, D}, DType::f32, dev()), yn = Tensor::empty({M, D}, nd, dev());
        Tensor mean = Tensor::empty({M}, DType::f32, dev()), rstd = Tensor::empty({M}, DType::f32, dev());
        Tensor mean_n = Tensor::empty({M}, DType::f32, dev()), rstd_n = Tensor::empty({M}, DType::f32, dev());
        kernels::layer_norm_forward(dev())(x, w, b, 1e-5, y32, mean, rstd);
        kernels::layer_norm_forward(dev())(x, w, b, 1e-5, yn, mean_n, rstd_n);
        expect_close(yn, ops::cast(y32, nd), ulps(nd), what + " y");
        expect_close(mean_n, mean, 0, what + " mean");
        expect_close(rstd_n, rstd, 0, what + " rstd");
        // The CPU backend (a cast after its f32 kernel) gives the device's values.
        Tensor yc = Tensor::empty({M, D}, nd), mc = Tensor::empty({M}, DType::f32), rc = Tensor::empty({M}, DType::f32);
        kernels::layer_norm_forward(kCPU)(x.to(kCPU), w.defined() ? w.to(kCPU) : w, b.defined() ? b.to(kCPU) : b, 1e-5,
                                          yc, mc, rc);
        expect_close(yn, yc, ulps(nd), what + " y vs cpu");

        const Tensor dy32 = ops::cast(dyn, DType::f32);
        for (bool with_dx : {true, false}) {
          Tensor dx32 = with_dx ? Tensor::empty({M, D}, DType::f32, dev()) : Tensor();
          Tensor dxn = with_dx ? Tensor::empty({M, D}, DType::f32, dev()) : Tensor();
          Tensor gw32 = affine ? Tensor::empty({D}, DType::f32, dev()) : Tensor(), gb32 = gw32.defined() ? Tensor::empty({D}, DType::f32, dev()) : Tensor();
          Tensor gwn = affine ? Tensor::empty({D}, DType::f32, dev()) : Tensor(), gbn = gwn.defined() ? Tensor::empty({D}, DType::f32, dev()) : Tensor();
          if (!with_dx && !affine) continue;
          kernels::layer_norm_backward(dev())(dy32, x, mean, rstd, w, dx32, gw32, gb32, {});
          kernels::layer_norm_backward(dev())(dyn, x, mean, rstd, w, dxn, gwn, gbn, {});
          const std::string how = what + (with_dx ? "" : " without dx");
          if (with_dx) expect_close(dxn, dx32, ulps(DType::f32), how + " dx");
          if (affine) {
            expect_close(gwn, gw32, ulps(DType::f32), how + " dweight");
            expect_close(gbn, gb32, ulps(DType::f32), how + " dbias");
          }
          if (with_dx) {  // the CPU backend widens dy first: its values, to rounding
            Tensor dxc = Tensor::empty({M, D}, DType::f32), none;
            kernels::layer_norm_backward(kCPU)(dyn.to(kCPU), x.to(kCPU), mc, rc, w.defined() ? w.to(kCPU) : w, dxc,
                                               none, none, {});
            expect_close(dxn, dxc, 1e-4, how + " dx vs cpu");
          }
        }
      }
  // Only the input's dtype, or f16/bf16 for f32, on both backends.
  for (Device d : {kCPU, dev()}) {
    Tensor x = random_tensor({3, 8}, DType::f32, 135).to(d), x64 = random_tensor({3, 8}, DType::f64, 135).to(d);
    Tensor mean = Tensor::empty({3}, DType::f32, d), rstd = Tensor::empty({3}, DType::f32, d);
    Tensor mean64 = Tensor::empty({3}, DType::f64, d), rstd64 = Tensor::empty({3}, DType::f64, d);
    Tensor y64 = Tensor::empty({3, 8}, DType::f64, d), ybf = Tensor::empty({3, 8}, DType::bf16, d), none;
    EXPECT_THROW(kernels::layer_norm_forward(d)(x, none, none, 1e-5, y64, mean, rstd), Error);
    EXPECT_THROW(kernels::layer_norm_forward(d)(x64, none, none, 1e-5, ybf, mean64, rstd64), Error);
    Tensor dx = Tensor::empty({3, 8}, DType::f32, d);
    EXPECT_THROW(kernels::layer_norm_backward(d)(y64, x, mean, rstd, none, dx, none, none, {}), Error);
  }
}

// add_params: the parameters' gradients are added to what dweight/dbias hold, exactly the written
// values plus them, on the one-pass kernels (with dx, D <= 1024) and the column sums (without dx, or
// D = 1500); anything but the statistics' dtype is refused. Then through the op: backward() adds
// into .grad (gradient_sink) what grad(), which never offers a sink, returns.
TEST_P(NormOps, LayerNormAddsParameterGradientsIntoGrad) {
  for (Device d : {kCPU, dev()})
    for (int64_t D : {24, 1500})
      for (bool with_dx : {true, false}) {
        const std::string what = std::string(d.str()) + " D=" + std::to_string(D) + (with_dx ? "" : " without dx");
        const int64_t M = 37;
        Tensor x = random_tensor({M, D}, DType::f32, 141, -2, 3).to(d), dy = random_tensor({M, D}, DType::f32, 142).to(d);
        Tensor w = random_tensor({D}, DType::f32, 143, 0.5, 1.5).to(d), b = random_tensor({D}, DType::f32, 144).to(d);
        Tensor y = Tensor::empty({M, D}, DType::f32, d), mean = Tensor::empty({M}, DType::f32, d),
               rstd = Tensor::empty({M}, DType::f32, d);
        kernels::layer_norm_forward(d)(x, w, b, 1e-5, y, mean, rstd);
        Tensor dx = with_dx ? Tensor::empty({M, D}, DType::f32, d) : Tensor();
        Tensor gw = Tensor::empty({D}, DType::f32, d), gb = Tensor::empty({D}, DType::f32, d);
        kernels::layer_norm_backward(d)(dy, x, mean, rstd, w, dx, gw, gb, {});
        const Tensor before_w = random_tensor({D}, DType::f32, 145).to(d), before_b = random_tensor({D}, DType::f32, 146).to(d);
        Tensor aw = before_w.clone(), ab = before_b.clone();
        kernels::layer_norm_backward(d)(dy, x, mean, rstd, w, dx, aw, ab, adds_params());
        expect_close(aw, ops::add(before_w, gw), 0, what + " dweight added");
        expect_close(ab, ops::add(before_b, gb), 0, what + " dbias added");
        Tensor narrow = Tensor::zeros({D}, DType::bf16, d), none;
        EXPECT_THROW(kernels::layer_norm_backward(d)(dy, x, mean, rstd, w, dx, narrow, none,
                                                     adds_params()),
                     Error)
            << what;
      }
  for (Device d : {kCPU, dev()}) {
    Tensor x = random_tensor({6, 40}, DType::f32, 151).to(d).set_requires_grad();
    Tensor w = random_tensor({40}, DType::f32, 152, 0.5, 1.5).to(d).set_requires_grad();
    Tensor b = random_tensor({40}, DType::f32, 153).to(d).set_requires_grad();
    Tensor dy = random_tensor({6, 40}, DType::f32, 154).to(d);
    const std::vector<Tensor> g = grad({ops::layer_norm(x, 1, w, b, 1e-5)}, {x, w, b}, {dy});
    for (int step = 0; step < 2; ++step) ops::layer_norm(x, 1, w, b, 1e-5).backward(dy);
    expect_close(w.grad(), ops::add(g[1], g[1]), 0, d.str() + " weight .grad after two backward()");
    expect_close(b.grad(), ops::add(g[2], g[2]), 0, d.str() + " bias .grad after two backward()");
    expect_close(x.grad(), ops::add(g[0], g[0]), 0, d.str() + " input .grad after two backward()");
  }
}

// LayerNormGradAdds::dx: dx is added to what the tensor holds (the input's gradient summed so far),
// summed in f32 and rounded once: exactly the written values plus it in f32 and f64, on every dx path
// (the one-pass kernel with the parameters, the warp kernels without them, block-per-row for D 9000);
// to a rounding in bf16. Then through the op: x + LayerNorm(x) on an interior x, whose residual part
// reaches x's gradient first and LayerNorm adds into it (gradient_sink), gives what grad() gives.
TEST_P(NormOps, LayerNormAddsInputGradientIntoTheSumSoFar) {
  for (Device d : {kCPU, dev()})
    for (DType dt : {DType::f32, DType::f64, DType::bf16})
      for (int64_t D : {24, 768, 9000})
        for (bool params : {true, false}) {
          const std::string what = std::string(d.str()) + " " + dtype_name(dt) + " D=" + std::to_string(D) +
                                   (params ? "" : " without parameters");
          const int64_t M = 37;
          const DType sd = dt == DType::f64 ? DType::f64 : DType::f32;
          Tensor x = random_tensor({M, D}, dt, 161, -2, 3).to(d), dy = random_tensor({M, D}, dt, 162).to(d);
          Tensor w = random_tensor({D}, sd, 163, 0.5, 1.5).to(d);
          Tensor y = Tensor::empty({M, D}, dt, d), mean = Tensor::empty({M}, sd, d), rstd = Tensor::empty({M}, sd, d);
          kernels::layer_norm_forward(d)(x, w, Tensor(), 1e-5, y, mean, rstd);
          Tensor dx = Tensor::empty({M, D}, dt, d), none;
          Tensor gw = params ? Tensor::empty({D}, sd, d) : none, gb = params ? Tensor::empty({D}, sd, d) : none;
          kernels::layer_norm_backward(d)(dy, x, mean, rstd, w, dx, gw, gb, {});
          const Tensor before = random_tensor({M, D}, dt, 164).to(d);
          Tensor added = before.clone();
          Tensor aw = params ? Tensor::empty({D}, sd, d) : none, ab = params ? Tensor::empty({D}, sd, d) : none;
          kernels::layer_norm_backward(d)(dy, x, mean, rstd, w, added, aw, ab, adds_dx());
          if (dt == DType::bf16)
            expect_close(added, ops::add(before, dx), ulps(dt), what + " dx added");
          else
            expect_close(added, ops::add(before, dx), 0, what + " dx added");
          if (params) {
            expect_close(aw, gw, 0, what + " dweight beside the added dx");
            expect_close(ab, gb, 0, what + " dbias beside the added dx");
          }
        }
  for (Device d : {kCPU, dev()}) {
    Tensor x = random_tensor({6, 40}, DType::f32, 171).to(d).set_requires_grad();
    Tensor w = random_tensor({40}, DType::f32, 172, 0.5, 1.5).to(d).set_requires_grad();
    Tensor dy = random_tensor({6, 40}, DType::f32, 174).to(d), s = random_tensor({6, 40}, DType::f32, 175).to(d);
    // h + LayerNorm(h) * s: the residual's part is the engine's alone when LayerNorm runs (the sink);
    // h + LayerNorm(h): LayerNorm's own incoming gradient is that same tensor (no sink).
    for (bool scaled : {true, false}) {
      auto model = [&] {
        Tensor h = ops::mul(x, x);  // interior
        Tensor n = ops::layer_norm(h, 1, w, Tensor(), 1e-5);
        return ops::add(h, scaled ? ops::mul(n, s) : n);
      };
      const std::string what = d.str() + (scaled ? " scaled" : " direct");
      const std::vector<Tensor> g = grad({model()}, {x, w}, {dy});
      x.set_grad(Tensor::zeros({6, 40}, DType::f32, d));
      w.set_grad(Tensor::zeros({40}, DType::f32, d));
      model().backward(dy);
      expect_close(x.grad(), g[0], 0, what + " x .grad through the residual and LayerNorm");
      expect_close(w.grad(), g[1], 0, what + " weight .grad");
    }
  }
}

// add_layer_norm: the sum and the LayerNorm of it equal add then layer_norm bit for bit, and so do
// the gradients of x, the branch and the parameters given gradients for both outputs: f32 and f64,
// bf16 throughout, and an autocast-like f32 stream with a bf16 or f16 branch and a narrow or f32
// output; on every dx path (the one-pass kernel with the parameters, the warp kernel without, the
// block-per-row kernel for D 9000), with the branch's narrow gradient rounded in the kernel where
// dy has its dtype and cast after it where not. backward() twice leaves twice grad()'s in .grad
// (the parameters' through their sinks).
TEST_P(NormOps, AddLayerNormEqualsTheAddThenLayerNorm) {
  struct Case {
    DType x, branch, y;
  };
  const Case cases[] = {{DType::f32, DType::f32, DType::f32},  {DType::f64, DType::f64, DType::f64},
                        {DType::bf16, DType::bf16, DType::bf16}, {DType::f32, DType::bf16, DType::bf16},
                        {DType::f32, DType::f16, DType::f16},  {DType::f32, DType::bf16, DType::f32},
                        {DType::f32, DType::f16, DType::bf16}};
  for (Device d : {kCPU, dev()})
    for (const Case& c : cases)
      for (int64_t D : {24, 768, 9000})
        for (bool params : {true, false}) {
          if (D == 9000 && c.x == DType::f64) continue;  // the f32 block path is enough
          const std::string what = d.str() + " x " + dtype_name(c.x) + " branch " + dtype_name(c.branch) + " y " +
                                   dtype_name(c.y) + " D=" + std::to_string(D) + (params ? "" : " without parameters");
          const int64_t M = 19;
          const DType sd = c.x == DType::f64 ? DType::f64 : DType::f32;
          Tensor x = random_tensor({M, D}, c.x, 181, -2, 3).to(d).set_requires_grad();
          Tensor r = random_tensor({M, D}, c.branch, 182).to(d).set_requires_grad();
          Tensor w = params ? random_tensor({D}, sd, 183, 0.5, 1.5).to(d).set_requires_grad() : Tensor();
          Tensor b = params ? random_tensor({D}, sd, 184).to(d).set_requires_grad() : Tensor();
          Tensor g_sum = random_tensor({M, D}, c.x, 185).to(d), dy = random_tensor({M, D}, c.y, 186).to(d);
          const ops::AddLayerNorm fused = ops::add_layer_norm(x, r, 1, w, b, 1e-5, c.y);
          const Tensor sum = ops::add(x, r), y = ops::layer_norm(sum, 1, w, b, 1e-5, c.y);
          ASSERT_EQ(fused.sum.dtype(), c.x) << what;
          ASSERT_EQ(fused.y.dtype(), c.y) << what;
          expect_close(fused.sum, sum, 0, what + " sum");
          expect_close(fused.y, y, 0, what + " y");
          std::vector<Tensor> inputs{x, r};
          if (params) inputs.insert(inputs.end(), {w, b});
          const std::vector<Tensor> gf = grad({fused.sum, fused.y}, inputs, {g_sum, dy});
          const std::vector<Tensor> gs = grad({sum, y}, inputs, {g_sum, dy});
          const char* names[] = {"x", "branch", "weight", "bias"};
          for (size_t i = 0; i < inputs.size(); ++i) {
            ASSERT_EQ(gf[i].dtype(), gs[i].dtype()) << what << " " << names[i];
            expect_close(gf[i], gs[i], 0, what + " gradient of " + names[i]);
          }
          if (!params || D != 768) continue;
          for (int step = 0; step < 2; ++step) {
            const ops::AddLayerNorm again = ops::add_layer_norm(x, r, 1, w, b, 1e-5, c.y);
            run_backward({again.sum, again.y}, {g_sum, dy}, false);
          }
          for (size_t i = 0; i < inputs.size(); ++i)
            expect_close(inputs[i].grad(), ops::add(gs[i], gs[i]), 0,
                         what + " .grad of " + names[i] + " after two backward()");
        }
}

TANDEM_BACKEND_SUITE(NormOps);

}  // namespace
}  // namespace tandem::testing
