// batch_norm with an epilogue (relu, then max_pool2d) against the separate ops: the same bits in
// forward, input/parameter gradients and running statistics, over the fast 2x2 pool, odd sizes that
// floor away a row and a column, and overlapping padded windows; gradcheck in f64; eval and errors.
#include <gtest/gtest.h>

#include "runtime/autocast.h"
#include "runtime/backend/norm.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace {

struct Case {
  Shape shape;
  bool relu, pool;
  std::array<int64_t, 2> kernel, stride, padding;
};

ops::BatchNormEpilogue epilogue_of(const Case& c) {
  ops::BatchNormEpilogue e;
  e.relu = c.relu;
  e.max_pool = c.pool;
  e.pool_kernel = c.kernel;
  e.pool_stride = c.stride;
  e.pool_padding = c.padding;
  return e;
}

// One training step of each form from the same state: output, dx, dw, db, running stats.
std::vector<std::vector<double>> run(const Case& c, DType dt, bool fused, bool training) {
  Generator gen(11);
  Tensor x = rand_uniform(c.shape, -2, 2, gen, dt), w = rand_uniform({c.shape[1]}, 0.5, 1.5, gen, dt),
         b = rand_uniform({c.shape[1]}, -1.5, -0.5, gen, dt);  // many windows wholly below zero
  Tensor rm = Tensor::zeros({c.shape[1]}, dt), rv = Tensor::ones({c.shape[1]}, dt);
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  Tensor y;
  if (fused) {
    y = ops::batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5, epilogue_of(c));
  } else {
    y = ops::batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5);
    if (c.relu) y = ops::relu(y);
    if (c.pool) y = ops::max_pool2d(y, c.kernel, c.stride, c.padding);
  }
  Tensor r = rand_uniform(y.shape(), -1, 1, gen, dt);
  auto g = grad({y}, {x, w, b}, {r});
  return {y.to_vector<double>(), g[0].to_vector<double>(), g[1].to_vector<double>(), g[2].to_vector<double>(),
          rm.to_vector<double>(), rv.to_vector<double>()};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {{4, 3, 8, 6}, true, true, {2, 2}, {0, 0}, {0, 0}},   // the cnn's block
      {{3, 2, 7, 5}, true, true, {2, 2}, {0, 0}, {0, 0}},   // odd: the last row and column are pooled away
      {{2, 3, 6, 6}, true, true, {3, 3}, {2, 2}, {1, 1}},   // overlapping, padded windows (generic pool path)
      {{5, 4, 3, 3}, true, false, {1, 1}, {0, 0}, {0, 0}},  // relu only
      {{2, 2, 4, 4}, false, true, {2, 2}, {0, 0}, {0, 0}},  // pool only
  };
  return c;
}

}  // namespace

TEST(BatchNormEpilogue, EqualsTheSeparateOpsBitForBit) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << shape_str(c.shape) << " relu " << c.relu
                                        << " pool " << c.pool << " k" << c.kernel[0]);
      auto fused = run(c, dt, true, true), separate = run(c, dt, false, true);
      const char* what[] = {"output", "dx", "dw", "db", "running_mean", "running_var"};
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], separate[i]) << what[i];
      // The relu mask matters here: without it the input gradient differs.
      if (c.relu) {
        Case no_relu = c;
        no_relu.relu = false;
        EXPECT_NE(run(no_relu, dt, true, true)[1], fused[1]);
      }
    }
  }
}

TEST(BatchNormEpilogue, EvalUsesRunningStatisticsThenTheOps) {
  for (const Case& c : cases()) {
    auto fused = run(c, DType::f32, true, false), separate = run(c, DType::f32, false, false);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], separate[i]) << i;
  }
}

TEST(BatchNormEpilogue, Gradcheck) {
  // Away from relu's kink and from pooling ties (finite differences are not defined there): random
  // f64 values almost surely keep every perturbed value on the same side.
  for (const Case& c : {cases()[0], cases()[2]}) {
    Tensor x = random_leaf(c.shape, 31), w = random_leaf({c.shape[1]}, 32, 0.5, 1.5),
           b = random_leaf({c.shape[1]}, 33);
    expect_gradcheck([&](const std::vector<Tensor>& t) {
      return ops::batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), true, 0.1, 1e-5, epilogue_of(c));
    }, {x, w, b});
  }
}

// Under autocast batch norm keeps a 16-bit x's dtype (PyTorch's policy): bit for bit the cast to
// f32, the f32 op and the cast back (output, gradients and running statistics), for every epilogue,
// in training (the fused kernels compute it with no casts: `widened`) and in eval (the casts run).
// (The cnn's blocks: a 16-bit convolution's output into batch norm, relu and pool, and on into the
// next 16-bit convolution.)
TEST(BatchNormEpilogue, AutocastKeeps16BitInputAsTheF32OpBetweenCastsBitForBit) {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const Case& c : cases()) {
      for (int mode = 0; mode < 3; ++mode) {  // training, training with running stats, eval
        const bool training = mode < 2, running = mode > 0;
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << shape_str(c.shape) << " relu " << c.relu
                                          << " pool " << c.pool << " k" << c.kernel[0] << " mode " << mode);
        std::vector<std::vector<double>> out[2];
        for (int direct = 0; direct < 2; ++direct) {
          Generator gen(5);
          Tensor x = rand_uniform(c.shape, -2, 2, gen, dt), w = rand_uniform({c.shape[1]}, 0.5, 1.5, gen),
                 b = rand_uniform({c.shape[1]}, -1.5, -0.5, gen);
          Tensor rm = running ? rand_uniform({c.shape[1]}, -0.5, 0.5, gen) : Tensor(),
                 rv = running ? rand_uniform({c.shape[1]}, 0.5, 1.5, gen) : Tensor();
          for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
          Tensor y;
          if (direct) {
            AutocastGuard guard(dt);
            autocast_reset_stats();
            y = ops::batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5, epilogue_of(c));
            if (training) EXPECT_EQ(autocast_stats().casts, 0);  // x read as it is, not cast
          } else {
            Tensor y32 = ops::batch_norm(ops::cast(x, DType::f32), w, b, rm, rv, training, 0.1, 1e-5, epilogue_of(c));
            y = ops::cast(y32, dt);
          }
          EXPECT_EQ(y.dtype(), dt);
          Tensor r = rand_uniform(y.shape(), -1, 1, gen, dt);
          auto g = grad({y}, {x, w, b}, {r});
          EXPECT_EQ(g[0].dtype(), dt);
          EXPECT_EQ(g[1].dtype(), DType::f32);
          out[direct] = {y.to_vector<double>(), g[0].to_vector<double>(), g[1].to_vector<double>(),
                         g[2].to_vector<double>()};
          if (running) {
            out[direct].push_back(rm.to_vector<double>());
            out[direct].push_back(rv.to_vector<double>());
          }
        }
        const char* what[] = {"output", "dx", "dw", "db", "running_mean", "running_var"};
        for (size_t i = 0; i < out[0].size(); ++i) EXPECT_EQ(out[1][i], out[0][i]) << what[i];
      }
    }
  }
}

// The fused kernels refuse what they cannot mean: a 16-bit x with an f32 y, or `widened` f32.
TEST(BatchNormEpilogue, WidenedKernelDtypes) {
  Tensor w = Tensor::ones({3}), b = Tensor::zeros({3});
  Tensor mean = Tensor::empty({3}), m2 = Tensor::empty({3}), invstd = Tensor::empty({3}), argmax;
  Tensor x32 = Tensor::ones({2, 3, 2, 2}), y32 = Tensor::empty({2, 3, 2, 2});
  Tensor x16 = Tensor::ones({2, 3, 2, 2}, DType::f16);
  kernels::BatchNormEpilogue epi;
  epi.widened = true;
  auto forward = kernels::batch_norm_forward_fused(x32.device());
  expect_value_error([&] { forward(x32, w, b, 1e-5, epi, y32, argmax, mean, m2, invstd); }, {"widened", "f32"});
  expect_value_error([&] { forward(x16, w, b, 1e-5, epi, y32, argmax, mean, m2, invstd); }, {"f16", "f32", "one dtype"});
}

TEST(BatchNormEpilogue, PoolNeedsImages) {
  ops::BatchNormEpilogue e;
  e.max_pool = true;
  e.pool_kernel = {2, 2};
  expect_value_error([&] { ops::batch_norm(Tensor::ones({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5, e); },
                     {"max_pool2d", "[N, C, H, W]"});
  e.pool_kernel = {5, 5};
  expect_value_error([&] {
    ops::batch_norm(Tensor::ones({2, 3, 4, 4}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5, e);
  }, {"larger than the padded input"});
}

}  // namespace tandem::testing
