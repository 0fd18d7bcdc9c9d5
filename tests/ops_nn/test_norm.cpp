// batch_norm (train with running stats over two steps, eval, rank 2 and 4), its SyncBN building
// blocks, and layer_norm: against PyTorch, gradcheck in f64, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/layers/layer_norm.h"
#include "runtime/autocast.h"
#include "runtime/backend/common/welford.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(BatchNorm, TwoTrainingStepsThenEvalMatchTorch) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 2e-5;
    Tensor w = ref(r::bn_w, {3}, dt, true), b = ref(r::bn_b, {3}, dt, true);
    Tensor rm = Tensor::zeros({3}, dt), rv = Tensor::ones({3}, dt);
    Tensor x1 = ref(r::bn_x1, {4, 3, 3, 2}, dt, true);
    Tensor y1 = ops::batch_norm(x1, w, b, rm, rv, true, 0.1, 1e-5);
    expect_close(y1, r::bn_y1, tol, tol);
    auto g = grads_of(y1, {x1, w, b}, r::bn1_r);
    expect_close(g[0], r::bn1_gx, tol, tol);
    expect_close(g[1], r::bn1_gw, tol, tol);
    expect_close(g[2], r::bn1_gb, tol, tol);
    Tensor y2 = ops::batch_norm(ref(r::bn_x2, {4, 3, 3, 2}, dt), w, b, rm, rv, true, 0.1, 1e-5);
    expect_close(y2, r::bn_y2, tol, tol);
    expect_close(rm, r::bn_rm2, tol, tol);  // momentum 0.1, unbiased variance
    expect_close(rv, r::bn_rv2, tol, tol);
    Tensor x3 = ref(r::bn_x3, {2, 3, 3, 2}, dt, true);
    std::vector<double> rm_before = rm.to_vector<double>(), rv_before = rv.to_vector<double>();
    Tensor y3 = ops::batch_norm(x3, w, b, rm, rv, false, 0.1, 1e-5);
    expect_close(y3, r::bn_y3, tol, tol);
    expect_close(rm, rm_before, 0, 0);  // eval leaves the running stats alone
    expect_close(rv, rv_before, 0, 0);
    g = grads_of(y3, {x3, w, b}, r::bn3_r);
    expect_close(g[0], r::bn3_gx, tol, tol);
    expect_close(g[1], r::bn3_gw, tol, tol);
    expect_close(g[2], r::bn3_gb, tol, tol);
  }
}

TEST(BatchNorm, Rank2WithoutAffineMatchesTorch) {
  Tensor rm = Tensor::zeros({4}), rv = Tensor::ones({4});
  Tensor x = ref(r::bn2d_x, {5, 4}, DType::f32, true);
  Tensor y = ops::batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.2, 1e-3);
  expect_close(y, r::bn2d_y, 2e-5, 2e-5);
  expect_close(rm, r::bn2d_rm, 1e-6, 1e-6);
  expect_close(rv, r::bn2d_rv, 1e-6, 1e-6);
  expect_close(grads_of(y, {x}, r::bn2d_r)[0], r::bn2d_gx, 2e-5, 2e-5);
}

TEST(BatchNorm, GradcheckTrainAndEval) {
  Tensor x = random_leaf({3, 2, 3, 2}, 21), w = random_leaf({2}, 22), b = random_leaf({2}, 23);
  for (bool training : {true, false}) {
    Tensor rm = Tensor::zeros({2}, DType::f64), rv = Tensor::full({2}, 0.7, DType::f64);
    // Running stats are updated on every call (finite differences call it many times), harmlessly.
    expect_gradcheck([&](const std::vector<Tensor>& t) {
      return ops::batch_norm(t[0], t[1], t[2], rm, rv, training, 0.1, 1e-5);
    }, {x, w, b});
  }
  Tensor x2 = random_leaf({4, 3}, 24);
  expect_gradcheck([](const std::vector<Tensor>& t) {
    return ops::batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  }, {x2});
}

TEST(BatchNorm, BuildingBlocksMergedAcrossSplitsEqualWholeBatch) {
  // What SyncBN does: statistics of two halves merged with welford_merge, sums added, total count.
  Generator gen(5);
  Tensor x = rand_uniform({6, 3, 2, 2}, -1, 2, gen, DType::f64), dy = rand_uniform({6, 3, 2, 2}, -1, 1, gen, DType::f64);
  Tensor w = rand_uniform({3}, 0.5, 1.5, gen, DType::f64), b = rand_uniform({3}, -1, 1, gen, DType::f64);
  ops::BatchNormStats whole = ops::batch_norm_stats(x);
  ops::BatchNormStats a = ops::batch_norm_stats(x.narrow0(0, 2)), c = ops::batch_norm_stats(x.narrow0(2, 4));
  EXPECT_EQ(a.count + c.count, whole.count);
  std::vector<double> mean(3), m2(3);
  for (size_t i = 0; i < 3; ++i) {
    Welford<double> s{a.mean.to_vector<double>()[i], a.m2.to_vector<double>()[i], a.count};
    welford_merge(s, Welford<double>{c.mean.to_vector<double>()[i], c.m2.to_vector<double>()[i], c.count});
    mean[i] = s.mean;
    m2[i] = s.m2;
  }
  expect_close(whole.mean, mean, 1e-12, 1e-12);
  expect_close(whole.m2, m2, 1e-12, 1e-12);
  Tensor invstd = ops::batch_norm_invstd(whole.mean, whole.m2, whole.count, 1e-5);
  Tensor y = ops::batch_norm_apply(x, whole.mean, invstd, w, b);
  Tensor xr = x.detach().clone();
  xr.set_requires_grad(true);
  Tensor ref_y = ops::batch_norm(xr, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
  expect_close(y, ref_y, 1e-12, 1e-12);
  // Backward: per-half sums added = whole sums; elemt with the total count = autograd's dx.
  auto ra = ops::batch_norm_backward_reduce(dy.narrow0(0, 2), x.narrow0(0, 2), whole.mean, invstd, w, b);
  auto rc = ops::batch_norm_backward_reduce(dy.narrow0(2, 4), x.narrow0(2, 4), whole.mean, invstd, w, b);
  auto rw = ops::batch_norm_backward_reduce(dy, x, whole.mean, invstd, w, b);
  std::vector<double> sd(3), sdx(3);
  for (size_t i = 0; i < 3; ++i) {
    sd[i] = ra.sum_dy.to_vector<double>()[i] + rc.sum_dy.to_vector<double>()[i];
    sdx[i] = ra.sum_dy_xmu.to_vector<double>()[i] + rc.sum_dy_xmu.to_vector<double>()[i];
  }
  expect_close(rw.sum_dy, sd, 1e-12, 1e-12);
  expect_close(rw.sum_dy_xmu, sdx, 1e-12, 1e-12);
  Tensor sd_t = Tensor::from_vector(sd, {3}), sdx_t = Tensor::from_vector(sdx, {3});
  Tensor dx_first = ops::batch_norm_backward_elemt(dy.narrow0(0, 2), x.narrow0(0, 2), whole.mean, invstd, w, sd_t,
                                                   sdx_t, whole.count);
  Tensor dx_ref = grad({ref_y}, {xr}, {dy})[0];
  expect_close(dx_first, dx_ref.narrow0(0, 2).to_vector<double>(), 1e-12, 1e-12);
}

TEST(BatchNorm, HalfInputComputesInF32) {
  Tensor w = ref(r::bn_w, {3}, DType::f32), b = ref(r::bn_b, {3}, DType::f32);
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  Tensor y = ops::batch_norm(ref(r::bn_x1, {4, 3, 3, 2}, DType::bf16), w, b, rm, rv, true, 0.1, 1e-5);
  EXPECT_EQ(y.dtype(), DType::bf16);
  expect_close(y, r::bn_y1, 0.05, 0.02);
}

TEST(BatchNorm, Errors) {
  Tensor x = Tensor::zeros({2, 3, 2, 2});
  expect_value_error([&] { ops::batch_norm(x, Tensor::ones({4}), Tensor(), Tensor(), Tensor(), true); },
                     {"weight", "[3]", "[2, 3, 2, 2]"});
  expect_value_error([&] { ops::batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                     {"more than 1 value per channel"});
  expect_value_error([&] { ops::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); }, {"running"});
  expect_value_error([&] { ops::batch_norm(Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                     {"[N, C]"});
}

TEST(LayerNorm, MatchesTorch) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 2e-5;
    Tensor x = ref(r::ln_x, {3, 4, 5}, dt, true), w = ref(r::ln_w, {4, 5}, dt, true), b = ref(r::ln_b, {4, 5}, dt, true);
    Tensor y = ops::layer_norm(x, 2, w, b, 1e-5);
    expect_close(y, r::ln_y, tol, tol);
    auto g = grads_of(y, {x, w, b}, r::ln_r);
    expect_close(g[0], r::ln_gx, tol, tol);
    expect_close(g[1], r::ln_gw, tol, tol);
    expect_close(g[2], r::ln_gb, tol, tol);
  }
}

TEST(LayerNorm, Gradcheck) {
  Tensor x = random_leaf({2, 3, 5}, 31), w = random_leaf({5}, 32), b = random_leaf({5}, 33);
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], 1, t[1], t[2], 1e-5); }, {x, w, b});
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], 3, Tensor(), Tensor(), 1e-5); }, {x});
}

// add_layer_norm's gradients of x, the branch and both parameters against finite differences,
// through both outputs (the sum weighted by a fixed tensor, so that each output's gradient counts).
TEST(AddLayerNorm, Gradcheck) {
  Tensor x = random_leaf({2, 3, 5}, 41), r = random_leaf({2, 3, 5}, 42), w = random_leaf({5}, 43),
         b = random_leaf({5}, 44);
  const Tensor k = random_leaf({2, 3, 5}, 45).detach();
  expect_gradcheck(
      [&](const std::vector<Tensor>& t) {
        const ops::AddLayerNorm o = ops::add_layer_norm(t[0], t[1], 1, t[2], t[3], 1e-5);
        return ops::add(ops::mul(o.sum, k), o.y);
      },
      {x, r, w, b});
  expect_gradcheck(
      [&](const std::vector<Tensor>& t) {
        const ops::AddLayerNorm o = ops::add_layer_norm(t[0], t[1], 2, Tensor(), Tensor(), 1e-5);
        return ops::add(ops::mul(o.sum, k), o.y);
      },
      {x, r});
}

// Bad shapes and dtypes are refused as add and layer_norm refuse them.
TEST(AddLayerNorm, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4});
  expect_value_error([&] { ops::add_layer_norm(x, Tensor::zeros({2, 3, 4}), 1, Tensor::ones({3}), Tensor()); },
                     {"weight", "[4]", "[3]"});
  expect_value_error([&] { ops::add_layer_norm(x, Tensor::zeros({2, 3, 4}), 4, Tensor(), Tensor()); },
                     {"normalized_dims"});
  expect_value_error([&] { ops::add_layer_norm(x, Tensor::zeros({2, 3, 5}), 1, Tensor(), Tensor()); }, {"add"});
  expect_value_error([&] { ops::add_layer_norm(x, Tensor(), 1, Tensor(), Tensor()); }, {"add_layer_norm", "branch"});
  expect_value_error(
      [&] { ops::add_layer_norm(x, Tensor::zeros({2, 3, 4}), 1, Tensor(), Tensor(), 1e-5, DType::f64); },
      {"add_layer_norm", "f64", "f32"});
}

TEST(LayerNorm, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4});
  expect_value_error([&] { ops::layer_norm(x, 1, Tensor::ones({3}), Tensor()); }, {"weight", "[4]", "[3]"});
  expect_value_error([&] { ops::layer_norm(x, 4, Tensor(), Tensor()); }, {"normalized_dims"});
}

// out_dtype f16/bf16 for f32 input: the f32 result rounded once, and the gradients of the f32 op
// followed by a cast (what autocast did before), bit for bit.
TEST(LayerNorm, NarrowOutputEqualsCastOfF32Result) {
  std::vector<double> xv, rv;
  for (int i = 0; i < 4 * 6; ++i) {
    xv.push_back(std::sin(0.7 * i) * 3 + 0.1 * i);
    rv.push_back(std::cos(1.3 * i));
  }
  const std::vector<double> wv{0.5, 1.5, 1.0, 0.75, 1.25, 2.0}, bv{0.1, -0.2, 0.3, 0.0, -0.5, 0.25};
  for (DType nd : {DType::bf16, DType::f16}) {
    std::vector<Tensor> n{ref(xv, {4, 6}, DType::f32, true), ref(wv, {6}, DType::f32, true), ref(bv, {6}, DType::f32, true)};
    std::vector<Tensor> c{ref(xv, {4, 6}, DType::f32, true), ref(wv, {6}, DType::f32, true), ref(bv, {6}, DType::f32, true)};
    Tensor yn = ops::layer_norm(n[0], 1, n[1], n[2], 1e-5, nd);
    Tensor yc = ops::cast(ops::layer_norm(c[0], 1, c[1], c[2], 1e-5), nd);
    ASSERT_EQ(yn.dtype(), nd);
    EXPECT_EQ(yn.to_vector<double>(), yc.to_vector<double>()) << dtype_name(nd);
    auto gn = grads_of(yn, n, rv), gc = grads_of(yc, c, rv);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(gn[i].dtype(), DType::f32);
      EXPECT_EQ(gn[i].to_vector<double>(), gc[i].to_vector<double>()) << dtype_name(nd) << " gradient " << i;
    }
  }
  expect_value_error([] { ops::layer_norm(Tensor::zeros({2, 3}), 1, Tensor(), Tensor(), 1e-5, DType::f64); },
                     {"layer_norm", "f64", "f32"});
  expect_value_error(
      [] { ops::layer_norm(Tensor::zeros({2, 3}, DType::f64), 1, Tensor(), Tensor(), 1e-5, DType::bf16); },
      {"layer_norm", "bf16", "f64"});
}

// nn::LayerNorm(autocast_output): the autocast dtype under autocast (f64 stays f64), else the input's.
TEST(LayerNorm, ModuleAutocastOutput) {
  nn::LayerNorm ln(Shape{3}, 1e-5, true, true), plain(Shape{3});
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 4, -1, 0, 3}, {2, 3}, DType::f32);
  EXPECT_EQ(ln(x).dtype(), DType::f32);
  {
    AutocastGuard guard(DType::bf16);
    EXPECT_EQ(ln(x).dtype(), DType::bf16);
    EXPECT_EQ(plain(x).dtype(), DType::f32);  // PyTorch's policy: layer_norm outputs f32
    EXPECT_EQ(ln(ops::cast(x, DType::f16)).dtype(), DType::bf16);
    nn::LayerNorm ln64(Shape{3}, 1e-5, false, true);
    EXPECT_EQ(ln64(ops::cast(x, DType::f64)).dtype(), DType::f64);
  }
}

// No rows: the output is empty and the parameter gradients are zeros of the parameters' shape.
TEST(LayerNorm, EmptyBatchGivesZeroParameterGradients) {
  Tensor x = Tensor::zeros({0, 4}, DType::f32);
  x.set_requires_grad(true);
  Tensor w = Tensor::ones({4}), b = Tensor::zeros({4});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor y = ops::layer_norm(x, 1, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  ops::sum(y).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
}

}  // namespace tandem::testing
