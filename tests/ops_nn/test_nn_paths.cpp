// The CPU fast paths against naive loops (chunked im2col GEMM, "same"-conv im2col, the small-K weight
// gradient, the AVX-512 2x2 max pool with long rows, fused vs staged batch norm) and thread-count
// independence.
#include <omp.h>

#include <gtest/gtest.h>

#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace {

// Direct convolution in f64: y[n, o, oy, ox] = b[o] + sum x[n, c, oy*s - p + i, ox*s - p + j] w[o, c, i, j].
std::vector<double> naive_conv(const Tensor& xt, const Tensor& wt, const Tensor& bt, int64_t s, int64_t p) {
  auto x = xt.to_vector<double>(), w = wt.to_vector<double>(), b = bt.to_vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t O = wt.size(0), KH = wt.size(2), KW = wt.size(3);
  const int64_t HO = (H + 2 * p - KH) / s + 1, WO = (W + 2 * p - KW) / s + 1;
  std::vector<double> y(static_cast<size_t>(N * O * HO * WO));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox) {
          double acc = b[static_cast<size_t>(o)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t iy = oy * s - p + i, ix = ox * s - p + j;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += x[static_cast<size_t>(((n * C + c) * H + iy) * W + ix)] *
                       w[static_cast<size_t>(((o * C + c) * KH + i) * KW + j)];
              }
          y[static_cast<size_t>(((n * O + o) * HO + oy) * WO + ox)] = acc;
        }
  return y;
}

}  // namespace

TEST(NnPaths, ChunkedConvMatchesNaive) {
  // K * L = 36 * 1600 per image: the batch is processed in chunks of 2 images (+ a last chunk of 1).
  Generator gen(3);
  Tensor x = rand_uniform({3, 4, 40, 40}, -1, 1, gen), w = rand_uniform({5, 4, 3, 3}, -1, 1, gen),
         b = rand_uniform({5}, -1, 1, gen);
  expect_close(ops::conv2d(x, w, b, {1, 1}, {1, 1}), naive_conv(x, w, b, 1, 1), 1e-4, 1e-4);  // "same" path
  expect_close(ops::conv2d(x, w, b, {2, 2}, {1, 1}), naive_conv(x, w, b, 2, 1), 1e-4, 1e-4);  // generic path
  // Gradients through the chunked path agree with one image at a time.
  Tensor xl = x.detach().clone(), wl = w.detach().clone();
  xl.set_requires_grad(true);
  wl.set_requires_grad(true);
  Tensor y = ops::conv2d(xl, wl, Tensor(), {1, 1}, {1, 1});
  Tensor dy = rand_uniform(y.shape(), -1, 1, gen);
  auto g = grad({y}, {xl, wl}, {dy});
  std::vector<double> dw_sum(static_cast<size_t>(wl.numel()), 0.0);
  for (int64_t n = 0; n < 3; ++n) {
    Tensor xi = x.narrow0(n, 1).clone();
    xi.set_requires_grad(true);
    Tensor wi = w.detach().clone();
    wi.set_requires_grad(true);
    auto gi = grad({ops::conv2d(xi, wi, Tensor(), {1, 1}, {1, 1})}, {xi, wi}, {dy.narrow0(n, 1).clone()});
    expect_close(g[0].narrow0(n, 1), gi[0].to_vector<double>(), 1e-5, 1e-5);
    auto v = gi[1].to_vector<double>();
    for (size_t k = 0; k < v.size(); ++k) dw_sum[k] += v[k];
  }
  expect_close(g[1], dw_sum, 1e-3, 1e-4);
}

TEST(NnPaths, SmallKWeightGradientMatchesNaive) {
  // One input channel (K = 9 <= kSmallK): the weight and bias gradients are dot products over the
  // pixels, accumulated over chunks of 3 images (K * L = 9 * 4096 per image) and 3 chunks here.
  Generator gen(12);
  for (int64_t stride : {1, 2}) {
    Tensor x = rand_uniform({7, 1, 64, 64}, -1, 1, gen), w = rand_uniform({5, 1, 3, 3}, -1, 1, gen),
           b = rand_uniform({5}, -1, 1, gen);
    Tensor wl = w.clone(), bl = b.clone();
    wl.set_requires_grad(true);
    bl.set_requires_grad(true);
    Tensor y = ops::conv2d(x, wl, bl, {stride, stride}, {1, 1});
    Tensor dy = rand_uniform(y.shape(), -1, 1, gen);
    auto g = grad({y}, {wl, bl}, {dy});
    const auto xv = x.to_vector<double>(), dv = dy.to_vector<double>();
    const int64_t H = 64, HO = y.size(2), WO = y.size(3);
    std::vector<double> dw(45, 0.0), db(5, 0.0);
    for (int64_t n = 0; n < 7; ++n)
      for (int64_t o = 0; o < 5; ++o)
        for (int64_t oy = 0; oy < HO; ++oy)
          for (int64_t ox = 0; ox < WO; ++ox) {
            const double d = dv[static_cast<size_t>(((n * 5 + o) * HO + oy) * WO + ox)];
            db[static_cast<size_t>(o)] += d;
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t iy = oy * stride - 1 + i, ix = ox * stride - 1 + j;
                if (iy < 0 || iy >= H || ix < 0 || ix >= H) continue;
                dw[static_cast<size_t>(o * 9 + i * 3 + j)] += d * xv[static_cast<size_t>((n * H + iy) * H + ix)];
              }
          }
    expect_close(g[0], dw, 1e-3, 1e-4);
    expect_close(g[1], db, 1e-3, 1e-4);
  }
}

TEST(NnPaths, MaxPool2x2LongRowsMatchesNaive) {
  Generator gen(4);
  for (int64_t width : {40, 41, 6}) {  // 20 outputs per row (a full 16-lane step + a masked tail), odd width
    Tensor x = rand_uniform({2, 3, 6, width}, -1, 1, gen);
    auto xv = x.to_vector<double>();
    const int64_t wo = width / 2;
    std::vector<double> want;
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t oy = 0; oy < 3; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double m = -1e300;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
              m = std::max(m, xv[static_cast<size_t>((p * 6 + 2 * oy + i) * width + 2 * ox + j)]);
          want.push_back(m);
        }
    expect_close(ops::max_pool2d(x, {2, 2}), want, 0, 0);
    // The same windows through the generic path (padding 1 shifts them; compare shapes only) and a
    // gradient check of the fast path in f64.
    Tensor xl = random_leaf({1, 2, 4, width}, 5);
    expect_gradcheck([](const std::vector<Tensor>& t) { return ops::max_pool2d(ops::mul(t[0], 1.0), {2, 2}); }, {xl});
  }
}

TEST(NnPaths, FusedAndStagedBatchNormAgree) {
  Generator gen(6);
  Tensor x = rand_uniform({5, 3, 4, 3}, -2, 2, gen, DType::f64), dy = rand_uniform({5, 3, 4, 3}, -1, 1, gen, DType::f64);
  Tensor w = rand_uniform({3}, 0.5, 1.5, gen, DType::f64), b = rand_uniform({3}, -1, 1, gen, DType::f64);
  Tensor xl = x.clone();
  xl.set_requires_grad(true);
  Tensor y = ops::batch_norm(xl, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);  // fused on CPU
  Tensor dx = grad({y}, {xl}, {dy})[0];
  auto s = ops::batch_norm_stats(x);
  Tensor inv = ops::batch_norm_invstd(s.mean, s.m2, s.count, 1e-5);
  expect_close(y, ops::batch_norm_apply(x, s.mean, inv, w, b), 1e-13, 1e-13);
  auto r = ops::batch_norm_backward_reduce(dy, x, s.mean, inv, w, b);
  expect_close(dx, ops::batch_norm_backward_elemt(dy, x, s.mean, inv, w, r.sum_dy, r.sum_dy_xmu, s.count), 1e-13,
               1e-13);
}

TEST(NnPaths, ResultsDoNotDependOnThreadCount) {
  Generator gen(8);
  // Large enough that every kernel on the path runs its OpenMP loops in parallel (kParallelMinWork).
  Tensor x = rand_uniform({8, 4, 32, 34}, -1, 1, gen), w = rand_uniform({6, 4, 3, 3}, -1, 1, gen),
         bn_w = rand_uniform({6}, 0.5, 1.5, gen), bn_b = rand_uniform({6}, -1, 1, gen);
  Tensor x1 = rand_uniform({8, 1, 32, 34}, -1, 1, gen), w1 = rand_uniform({6, 1, 3, 3}, -1, 1, gen),
         b1 = rand_uniform({6}, -1, 1, gen);
  ops::BatchNormEpilogue relu_pool;
  relu_pool.relu = true;
  relu_pool.max_pool = true;
  relu_pool.pool_kernel = {2, 2};
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Tensor xl = x.clone(), wl = w.clone(), w1l = w1.clone(), b1l = b1.clone();
    for (Tensor* t : {&xl, &wl, &w1l, &b1l}) t->set_requires_grad(true);
    Tensor h = ops::conv2d(xl, wl, Tensor(), {1, 1}, {1, 1});
    h = ops::batch_norm(h, bn_w, bn_b, Tensor(), Tensor(), true);
    h = ops::max_pool2d(h, {2, 2});
    h = ops::avg_pool2d(h, {2, 2}, {1, 1});
    Tensor h2 = ops::conv2d(xl, wl, Tensor(), {2, 2}, {1, 1});  // the generic (strided) im2col path
    // One input channel (the small-K weight gradient), then the fused BN-ReLU-MaxPool block.
    Tensor h3 = ops::conv2d(x1, w1l, b1l, {1, 1}, {1, 1});
    h3 = ops::batch_norm(h3, bn_w, bn_b, Tensor(), Tensor(), true, 0.1, 1e-5, relu_pool);
    auto g = grad({h, h2, h3}, {xl, wl, w1l, b1l},
                  {Tensor::full(h.shape(), 0.5), Tensor::full(h2.shape(), -0.25), Tensor::full(h3.shape(), 0.75)});
    std::vector<std::vector<float>> out{h.to_vector<float>(), h2.to_vector<float>(), h3.to_vector<float>()};
    for (const Tensor& t : g) out.push_back(t.to_vector<float>());
    return out;
  };
  auto one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(1);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

}  // namespace tandem::testing
