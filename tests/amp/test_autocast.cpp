// Autocast policy: output dtypes per op under f16 and bf16, f64 and integers never cast, the
// parameter cast cache (one cast per scope), gradients reaching f32 leaves in f32, nesting and
// enabled=false.
#include <gtest/gtest.h>

#include <tuple>

#include "nn/layers/layer_norm.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"

using namespace tandem;

namespace {
Tensor leaf(const Shape& s, uint64_t seed, DType dtype = DType::f32) {
  Generator g(seed);
  Tensor t = rand_uniform(s, -1.0, 1.0, g, dtype);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Autocast, OutputDtypesPerOp) {
  for (DType low : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(low));
    Tensor x = leaf({4, 8}, 1), w = leaf({3, 8}, 2), b = leaf({3}, 3);
    Tensor img = leaf({2, 3, 6, 6}, 4), k = leaf({5, 3, 3, 3}, 5);
    Tensor target = Tensor::from_vector<int64_t>({0, 2, 1, 0}, {4});
    AutocastGuard guard(low);
    // Low precision: matmul, linear, conv.
    Tensor y = ops::linear(x, w, b);
    EXPECT_EQ(y.dtype(), low);
    EXPECT_EQ(ops::matmul(x, ops::transpose(w, 0, 1)).dtype(), low);
    Tensor c = ops::conv2d(img, k);
    EXPECT_EQ(c.dtype(), low);
    // f32: softmax family, losses, layer norm, reductions (even on low-precision inputs).
    EXPECT_EQ(ops::softmax(y, 1).dtype(), DType::f32);
    EXPECT_EQ(ops::log_softmax(y, 1).dtype(), DType::f32);
    EXPECT_EQ(ops::cross_entropy(y, target).dtype(), DType::f32);
    EXPECT_EQ(ops::mse_loss(y, Tensor::zeros({4, 3})).dtype(), DType::f32);
    EXPECT_EQ(ops::layer_norm(y, 1, Tensor(), Tensor()).dtype(), DType::f32);
    // Batch norm keeps its input's dtype, as PyTorch's autocast (it is on neither list): a 16-bit
    // convolution's output stays 16-bit, in training and eval; an f32 input stays f32.
    Tensor rm = Tensor::zeros({5}), rv = Tensor::ones({5});
    EXPECT_EQ(ops::batch_norm(c, Tensor(), Tensor(), rm, rv, true).dtype(), low);
    EXPECT_EQ(ops::batch_norm(c, Tensor(), Tensor(), rm, rv, false).dtype(), low);
    EXPECT_EQ(ops::batch_norm(img, Tensor(), Tensor(), Tensor::zeros({3}), Tensor::ones({3}), true).dtype(), DType::f32);
    EXPECT_EQ(ops::sum(y).dtype(), DType::f32);
    EXPECT_EQ(ops::mean(y, 0).dtype(), DType::f32);
    // Neither f64 nor integer tensors are cast.
    Tensor xd = leaf({4, 8}, 6, DType::f64), wd = leaf({3, 8}, 7, DType::f64);
    EXPECT_EQ(ops::linear(xd, wd).dtype(), DType::f64);
    EXPECT_EQ(autocast_arg(target, AutocastCategory::LowPrecision).dtype(), DType::i64);
  }
}

TEST(Autocast, OffOutsideTheScopeAndWhenDisabled) {
  Tensor x = leaf({2, 4}, 1), w = leaf({3, 4}, 2);
  EXPECT_EQ(ops::linear(x, w).dtype(), DType::f32);
  {
    AutocastGuard on(DType::bf16);
    EXPECT_EQ(autocast_dtype(), DType::bf16);
    {
      AutocastGuard off(DType::bf16, /*enabled=*/false);
      EXPECT_FALSE(autocast_dtype().has_value());
      EXPECT_EQ(ops::linear(x, w).dtype(), DType::f32);
    }
    {
      AutocastGuard inner(DType::f16);
      EXPECT_EQ(ops::linear(x, w).dtype(), DType::f16);
    }
    EXPECT_EQ(ops::linear(x, w).dtype(), DType::bf16);
  }
  EXPECT_FALSE(autocast_dtype().has_value());
  EXPECT_THROW(AutocastGuard bad(DType::f32), ValueError);
}

TEST(Autocast, ParametersAreCastOncePerScope) {
  Tensor w = leaf({6, 6}, 3);
  Tensor x = Tensor::ones({2, 6});  // not a leaf requiring grad: cast each time, never cached
  autocast_reset_stats();
  Tensor loss;
  {
    AutocastGuard guard(DType::bf16);
    Tensor h = x;
    for (int i = 0; i < 4; ++i) h = ops::linear(h, w);  // the same weight four times
    loss = ops::sum(h);
  }
  AutocastStats s = autocast_stats();
  // w: 1 cast + 3 hits; x: 1 cast (bf16 activations are not cast again); sum: 1 cast to f32.
  EXPECT_EQ(s.cache_hits, 3);
  EXPECT_EQ(s.casts, 3);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32) << "the gradient reaches the f32 parameter in f32";
  // A new scope (the next step) casts again.
  autocast_reset_stats();
  {
    AutocastGuard guard(DType::bf16);
    ops::linear(x, w);
    ops::linear(x, w);
  }
  EXPECT_EQ(autocast_stats().cache_hits, 1);
}

TEST(Autocast, GradientsMatchF32WithinLowPrecision) {
  Tensor x = leaf({8, 16}, 11), w = leaf({4, 16}, 12), b = leaf({4}, 13);
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  ops::cross_entropy(ops::linear(x, w, b), target).backward();
  std::vector<float> g32 = w.grad().to_vector<float>();
  w.grad().zero_();
  {
    AutocastGuard guard(DType::bf16);
    Tensor loss = ops::cross_entropy(ops::linear(x, w, b), target);
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
  }
  std::vector<float> g16 = w.grad().to_vector<float>();
  for (size_t i = 0; i < g32.size(); ++i) EXPECT_NEAR(g16[i], g32[i], 2e-2 * (1 + std::abs(g32[i])));
}

// A parameter's gradient from an autocast region arrives in bf16 and is widened as it is added: equal
// to the f32 sum of the widened parts, whether .grad exists yet or not, and in grad(). (A conv2d's
// weight gradient: a linear's goes into .grad unrounded, below.)
TEST(Autocast, ParameterGradientsAreWidenedAsTheyAccumulate) {
  Tensor x = leaf({1, 2, 5, 5}, 21), w = leaf({3, 2, 3, 3}, 22);
  auto loss_of = [&](bool direct_too) {
    AutocastGuard guard(DType::bf16);
    // An f32 use of w recorded first, so that backward delivers the bf16 gradient to w's sink first.
    Tensor direct = direct_too ? ops::sum(ops::mul(w, 3.0)) : Tensor();  // gradient 3
    Tensor y = ops::sum(ops::conv2d(x.detach(), w));  // w cast to bf16; its gradient is bf16
    return direct_too ? ops::add(direct, y) : y;
  };
  // The bf16 part alone, through grad() (widened on the way out).
  std::vector<Tensor> parts = grad({loss_of(false)}, {w});
  ASSERT_EQ(parts[0].dtype(), DType::f32);
  // Each bf16 part is a bf16 value: widening it is exact, so the sums below are exact in f32.
  std::vector<float> bf = parts[0].to_vector<float>();
  for (float v : bf) EXPECT_EQ(v, float(bfloat16(v)));
  loss_of(true).backward();  // no .grad yet: bf16 part + 3 summed in f32
  std::vector<float> g = w.grad().to_vector<float>();
  ASSERT_EQ(w.grad().dtype(), DType::f32);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], bf[i] + 3.0f) << i;
  loss_of(false).backward();  // .grad exists: the bf16 part added to it in place
  std::vector<float> g2 = w.grad().to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g2[i], g[i] + bf[i]) << i;
}

// Under backward, a linear's (and a matmul's) weight gradient is summed by its GEMM straight into the
// f32 .grad (gradient_sink, GemmArgs::wide_c): f32 products of the bf16 operands, never rounded to
// bf16, added to .grad in place, the same whether .grad exists yet or not; with a second use of
// the weight (the tied head's case) both parts arrive. The bias's gradient likewise, by the same
// GEMM's epilogue (GemmArgs::sums_add). grad(), which leaves .grad alone, still returns the
// gradients rounded to bf16 and widened.
TEST(Autocast, LinearWeightGradientsAreSummedUnroundedIntoGrad) {
  const int64_t M = 6, in = 40, out = 5;
  Tensor x = leaf({M, in}, 31), w = leaf({out, in}, 32), b = leaf({out}, 33);
  Generator gen(34);
  Tensor gy = rand_uniform({M, out}, -1.0, 1.0, gen);
  auto loss_of = [&](bool tied) {
    AutocastGuard guard(DType::bf16);
    Tensor y = ops::linear(x.detach(), w, b);
    Tensor loss = ops::sum(ops::mul(ops::cast(y, DType::f32), gy));  // dL/dy = gy
    if (tied) loss = ops::add(loss, ops::sum(ops::mul(w, 3.0)));   // gradient 3, f32
    return loss;
  };
  // dW[o][i] = sum_m gy[m][o] x[m][i] on the bf16 values, in f64 (the reference).
  auto bf = [](float v) { return static_cast<double>(float(bfloat16(v))); };
  std::vector<float> xv = x.to_vector<float>(), gv = gy.to_vector<float>();
  std::vector<double> want(static_cast<size_t>(out * in), 0.0), want_b(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t m = 0; m < M; ++m) want[o * in + i] += bf(gv[m * out + o]) * bf(xv[m * in + i]);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t m = 0; m < M; ++m) want_b[o] += bf(gv[m * out + o]);
  loss_of(false).backward();  // no .grad yet
  std::vector<float> g1 = w.grad().to_vector<float>(), b1 = b.grad().to_vector<float>();
  int unrounded = 0, unrounded_b = 0;
  for (size_t k = 0; k < g1.size(); ++k) {
    EXPECT_NEAR(g1[k], want[k], 1e-5 * (1 + std::abs(want[k]))) << k;
    unrounded += g1[k] != float(bfloat16(g1[k]));
  }
  for (size_t o = 0; o < b1.size(); ++o) {
    EXPECT_NEAR(b1[o], want_b[o], 1e-6 * (1 + std::abs(want_b[o]))) << "bias " << o;
    unrounded_b += b1[o] != float(bfloat16(b1[o]));
  }
  EXPECT_GT(unrounded, 0) << "the weight gradient was rounded to bf16 on its way to .grad";
  EXPECT_GT(unrounded_b, 0) << "the bias gradient was rounded to bf16 on its way to .grad";
  loss_of(true).backward();  // added in place, with the tied f32 part
  std::vector<float> g2 = w.grad().to_vector<float>();
  for (size_t k = 0; k < g2.size(); ++k) EXPECT_NEAR(g2[k], 2 * g1[k] + 3.0f, 1e-5 * (1 + std::abs(g2[k]))) << k;
  std::vector<float> b2 = b.grad().to_vector<float>();
  for (size_t o = 0; o < b2.size(); ++o) EXPECT_EQ(b2[o], b1[o] + b1[o]) << "bias " << o;
  // grad(): the bf16 gradient widened.
  std::vector<float> g3 = grad({loss_of(false)}, {w})[0].to_vector<float>();
  for (size_t k = 0; k < g3.size(); ++k) {
    EXPECT_EQ(g3[k], float(bfloat16(g3[k]))) << k;
    EXPECT_NEAR(g3[k], want[k], 1e-2 * (1 + std::abs(want[k]))) << k;
  }
  std::vector<float> gb3 = grad({loss_of(false)}, {b})[0].to_vector<float>();
  for (size_t o = 0; o < gb3.size(); ++o) {
    EXPECT_EQ(gb3[o], float(bfloat16(gb3[o]))) << "bias " << o;
    EXPECT_NEAR(gb3[o], want_b[o], 1e-2 * (1 + std::abs(want_b[o]))) << "bias " << o;
  }
}

// autocast_prefetch casts the parameters LowPrecision ops will cast, in one list, and caches them:
// the ops then hit the cache, and values and gradients equal those without the prefetch.
// A GPT block's LayerNorm writes the autocast dtype itself (nn::LayerNorm's autocast_output): the
// loss and every gradient are those of a plain LayerNorm whose output each linear casts.
TEST(Autocast, LayerNormWritingTheLowPrecisionChangesNoResult) {
  auto run = [&](bool autocast_output) {
    Tensor x = leaf({6, 8}, 41), w = leaf({5, 8}, 42), b = leaf({5}, 43);
    nn::LayerNorm ln(Shape{8}, 1e-5, true, autocast_output);
    autocast_reset_stats();
    Tensor loss;
    {
      AutocastGuard guard(DType::bf16);
      Tensor h = ln(x);
      EXPECT_EQ(h.dtype(), autocast_output ? DType::bf16 : DType::f32);
      loss = ops::sum(ops::mul(ops::linear(h, w, b), ops::linear(h, w, b)));
    }
    const int64_t casts = autocast_stats().casts;
    loss.backward();
    return std::make_tuple(casts, loss.item(), x.grad().to_vector<float>(), w.grad().to_vector<float>(),
                           ln.param("weight").grad().to_vector<float>(), ln.param("bias").grad().to_vector<float>());
  };
  auto [c0, l0, gx0, gw0, glw0, glb0] = run(false);
  auto [c1, l1, gx1, gw1, glw1, glb1] = run(true);
  EXPECT_EQ(c1, c0 - 2) << "the LayerNorm output's casts, one at each linear (an activation is not cached)";
  EXPECT_EQ(l1, l0);
  EXPECT_EQ(gx1, gx0);
  EXPECT_EQ(gw1, gw0);
  EXPECT_EQ(glw1, glw0);
  EXPECT_EQ(glb1, glb0);
}

TEST(Autocast, PrefetchCachesTheCastsAndChangesNoResult) {
  Tensor x = Tensor::ones({3, 6});
  auto run = [&](bool prefetch) {
    Tensor w1 = leaf({5, 6}, 31), b1 = leaf({5}, 32), w2 = leaf({4, 5}, 33);
    Tensor frozen = leaf({4}, 34).detach();  // no grad: never cached, so not prefetched
    autocast_reset_stats();
    Tensor loss;
    {
      AutocastGuard guard(DType::bf16);
      if (prefetch) autocast_prefetch({w1, b1, w2, frozen, w1});
      loss = ops::sum(ops::linear(ops::linear(x, w1, b1), w2, frozen));
    }
    AutocastStats s = autocast_stats();
    loss.backward();
    return std::make_tuple(s, loss.item(), w1.grad().to_vector<float>(), b1.grad().to_vector<float>(),
                           w2.grad().to_vector<float>());
  };
  auto [s0, l0, gw1_0, gb1_0, gw2_0] = run(false);
  auto [s1, l1, gw1_1, gb1_1, gw2_1] = run(true);
  EXPECT_EQ(s0.cache_hits, 0);
  EXPECT_EQ(s1.cache_hits, 3) << "w1, b1 and w2 come from the prefetch";
  EXPECT_EQ(s1.casts, s0.casts) << "the same casts, made earlier (w1 listed twice is cast once)";
  EXPECT_EQ(l1, l0);
  EXPECT_EQ(gw1_1, gw1_0);
  EXPECT_EQ(gb1_1, gb1_0);
  EXPECT_EQ(gw2_1, gw2_0);
  autocast_reset_stats();
  autocast_prefetch({leaf({2, 2}, 35)});  // outside a guard: nothing
  EXPECT_EQ(autocast_stats().casts, 0);
}
