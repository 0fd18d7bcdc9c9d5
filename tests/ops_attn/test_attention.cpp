// causal_attention on the CPU: f64 finite differences, the fused op against the composed ops
// (matmul + mask + softmax + matmul) for tiles that do not divide T, causal masking, shape errors.
#include <gtest/gtest.h>

#include <functional>

#include "kernels/cpu/gemm_avx512.h"
#include "runtime/autocast.h"
#include "runtime/backend/attention.h"
#include "runtime/ops.h"
#include "tests/ops_attn/composed.h"
#include "tests/support/cpu_gemm_path.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {

Tensor leaf(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  Tensor t = rand_uniform(shape, -1.0, 1.0, gen, dtype);
  t.set_requires_grad(true);
  return t;
}

TEST(CausalAttention, GradcheckSmall) {
  for (Shape s : {Shape{2, 3, 5, 4}, Shape{1, 1, 1, 3}, Shape{1, 2, 7, 1}}) {
    Tensor q = leaf(s, 1), k = leaf(s, 2), v = leaf(s, 3);
    expect_gradcheck([](const std::vector<Tensor>& t) { return ops::causal_attention(t[0], t[1], t[2]); }, {q, k, v});
  }
}

TEST(CausalAttention, GradcheckAcrossDefaultTiles) {
  // T = 70 spans two 64-row tiles, the second one partial.
  Shape s{1, 1, 70, 2};
  Tensor q = leaf(s, 4), k = leaf(s, 5), v = leaf(s, 6);
  expect_gradcheck([](const std::vector<Tensor>& t) { return ops::causal_attention(t[0], t[1], t[2]); }, {q, k, v});
}

TEST(CausalAttention, MatchesComposedOps) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
    for (Shape s : {Shape{2, 2, 9, 8}, Shape{1, 3, 130, 16}, Shape{2, 1, 1, 4}}) {
      Tensor q = leaf(s, 7, dt), k = leaf(s, 8, dt), v = leaf(s, 9, dt);
      Tensor y = ops::causal_attention(q, k, v);
      Tensor yr = composed_attention(q, k, v, causal_mask(s[2], dt));
      expect_close(y, yr, tol, tol);
      Generator gen(10);
      Tensor r = rand_uniform(s, -1.0, 1.0, gen, dt);
      auto g = grad({y}, {q, k, v}, {r});
      auto gr = grad({yr}, {q, k, v}, {r});
      for (int i = 0; i < 3; ++i) expect_close(g[i], gr[i], tol, tol);
    }
  }
}

// The kernels with tiles that leave partial tiles everywhere, and with unequal query/key tiles (a
// key tile then holds rows that see none of its keys, and a query tile stops inside a key tile),
// against the default tiles.
TEST(CausalAttention, TileShapesAgree) {
  Shape s{2, 2, 13, 5};
  Tensor q = leaf(s, 11).detach(), k = leaf(s, 12).detach(), v = leaf(s, 13).detach();
  Generator gen(14);
  Tensor dout = rand_uniform(s, -1.0, 1.0, gen, DType::f64);
  auto run = [&](int64_t bq, int64_t bk) {
    kernels::AttentionShape a;
    a.b = s[0]; a.h = s[1]; a.t = s[2]; a.d = s[3];
    a.scale = 1.0 / std::sqrt(5.0);
    a.block_q = bq; a.block_k = bk;
    Tensor o = Tensor::empty(s, DType::f64), lse = Tensor::empty({s[0], s[1], s[2]}, DType::f64);
    kernels::attention_forward(kCPU)(q, k, v, o, lse, a);
    std::vector<Tensor> g{Tensor::empty(s, DType::f64), Tensor::empty(s, DType::f64), Tensor::empty(s, DType::f64)};
    kernels::attention_backward(kCPU)(q, k, v, o, lse, dout, g[0], g[1], g[2], a);
    return std::vector<Tensor>{o, lse, g[0], g[1], g[2]};
  };
  auto want = run(0, 0);
  for (auto [bq, bk] : {std::pair<int64_t, int64_t>{1, 1}, {3, 2}, {2, 3}, {4, 4}, {5, 7}, {16, 1}, {3, 8}, {4, 13}, {64, 64}}) {
    auto got = run(bq, bk);
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], 1e-12, 1e-12);
  }
}

TEST(CausalAttention, FutureTokensDoNotReachEarlierOutputs) {
  Shape s{1, 2, 12, 4};
  const int64_t j = 7;  // the token whose k and v change
  Tensor q = leaf(s, 15), k = leaf(s, 16), v = leaf(s, 17);
  Tensor y = ops::causal_attention(q, k, v);
  std::vector<double> kv = k.to_vector<double>(), vv = v.to_vector<double>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 4; ++c) {
      kv[static_cast<size_t>((h * 12 + j) * 4 + c)] += 3.0;
      vv[static_cast<size_t>((h * 12 + j) * 4 + c)] -= 2.0;
    }
  Tensor y2 = ops::causal_attention(q, Tensor::from_vector(kv, s), Tensor::from_vector(vv, s));
  std::vector<double> a = y.to_vector<double>(), b = y2.to_vector<double>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t c = 0; c < 4; ++c) {
        const size_t i = static_cast<size_t>((h * 12 + t) * 4 + c);
        if (t < j) {
          EXPECT_EQ(a[i], b[i]) << "h " << h << " t " << t;
        } else if (t == j) {
          EXPECT_NE(a[i], b[i]) << "h " << h << " t " << t;
        }
      }
  // The loss of output row 4 alone has no gradient on the keys and values after it.
  Tensor sel = Tensor::zeros(s, DType::f64);
  sel.data<double>()[(0 * 12 + 4) * 4 + 1] = 1.0;
  auto g = grad({y}, {k, v}, {sel});
  std::vector<double> gk = g[0].to_vector<double>(), gv = g[1].to_vector<double>();
  double before = 0;
  for (int64_t t = 0; t < 12; ++t)
    for (int64_t c = 0; c < 4; ++c) {
      const size_t i = static_cast<size_t>(t * 4 + c);
      if (t > 4) {
        EXPECT_EQ(gk[i], 0.0) << t;
        EXPECT_EQ(gv[i], 0.0) << t;
      } else {
        before += std::abs(gk[i]) + std::abs(gv[i]);
      }
    }
  EXPECT_GT(before, 0.0);
}

// The f32 tile products on small_gemm_f32 (AVX-512, or AVX2 in the _avx2 run; unpacked) against Eigen's (TANDEM_CPU_GEMM=eigen):
// the same values and gradients to f32 rounding for head widths around the kernel's 16/32-column
// tails, sequences around the tiles, heads contiguous and token-major; a future token's change
// reaches no earlier row, bit for bit.
TEST(CausalAttention, F32TileProductsMatchEigens) {
  if (std::string(kernels::cpu_f32_gemm_isa()) == "eigen") GTEST_SKIP() << "no AVX2 on this CPU: Eigen's products run";
  auto both_ways = [](const std::function<std::vector<Tensor>()>& run) {
    std::vector<Tensor> fast = run(), eigen;
    {
      CpuGemmPath path("eigen");
      eigen = run();
    }
    ASSERT_EQ(fast.size(), eigen.size());
    for (size_t i = 0; i < fast.size(); ++i) expect_close(fast[i], eigen[i], 2e-5, 2e-5);
  };
  for (Shape s : {Shape{1, 2, 1, 64}, Shape{2, 2, 31, 33}, Shape{1, 3, 130, 64}, Shape{1, 1, 70, 128},
                  Shape{2, 1, 45, 1}, Shape{1, 2, 129, 17}}) {
    SCOPED_TRACE(::testing::Message() << "t " << s[2] << " d " << s[3]);
    Tensor q = leaf(s, 21, DType::f32), k = leaf(s, 22, DType::f32), v = leaf(s, 23, DType::f32);
    Generator gen(24);
    const Tensor r = rand_uniform(s, -1.0, 1.0, gen, DType::f32);
    both_ways([&] {
      Tensor y = ops::causal_attention(q, k, v);
      auto g = grad({y}, {q, k, v}, {r});
      return std::vector<Tensor>{y, g[0], g[1], g[2]};
    });
  }
  Tensor x = leaf({2, 45, 3 * 2 * 64}, 25, DType::f32);  // token-major q, k, v of 2 heads
  Generator gen(26);
  const Tensor r = rand_uniform({2, 45, 2 * 64}, -1.0, 1.0, gen, DType::f32);
  both_ways([&] {
    Tensor y = ops::causal_self_attention(x, 2);
    auto g = grad({y}, {x}, {r});
    return std::vector<Tensor>{y, g[0]};
  });
  // Token 40's keys and values change: rows before it keep every bit (their products skip nothing,
  // but a masked key's probability is exactly 0).
  const Shape s{1, 1, 70, 64};
  Tensor q = leaf(s, 27, DType::f32), k = leaf(s, 28, DType::f32), v = leaf(s, 29, DType::f32);
  std::vector<float> kv = k.to_vector<float>(), vv = v.to_vector<float>();
  for (int64_t c = 0; c < 64; ++c) {
    kv[static_cast<size_t>(40 * 64 + c)] += 3.0f;
    vv[static_cast<size_t>(40 * 64 + c)] -= 2.0f;
  }
  const std::vector<float> a = ops::causal_attention(q, k, v).to_vector<float>();
  const std::vector<float> b =
      ops::causal_attention(q, Tensor::from_vector(kv, s), Tensor::from_vector(vv, s)).to_vector<float>();
  for (size_t i = 0; i < 40 * 64; ++i) ASSERT_EQ(a[i], b[i]) << "row " << i / 64;
  EXPECT_NE(a[40 * 64], b[40 * 64]);
}

TEST(CausalAttention, HalfAndBfloat16AccumulateInF32) {
  Shape s{1, 2, 20, 8};
  Tensor q = leaf(s, 18, DType::f32), k = leaf(s, 19, DType::f32), v = leaf(s, 20, DType::f32);
  Tensor want = ops::causal_attention(q, k, v);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor q16 = ops::cast(q, dt), k16 = ops::cast(k, dt), v16 = ops::cast(v, dt);
    Tensor y = ops::causal_attention(q16, k16, v16);
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, want, dt == DType::bf16 ? 3e-2 : 4e-3, 2e-2);
    auto g = grad({y}, {q, k, v}, {Tensor::ones(s, dt)});
    for (const Tensor& gi : g) EXPECT_EQ(gi.dtype(), DType::f32);
  }
}

// Under autocast the CPU runs attention in f32 (its f32 kernels would only convert 16-bit operands),
// except bf16 where its bf16 GEMM runs on AMX tiles (kernels/cpu/attention_bf16.cpp).
TEST(CausalAttention, AutocastPicksTheKernelsPrecision) {
  Shape s{1, 2, 9, 4};
  Tensor q = leaf(s, 21, DType::f32), k = leaf(s, 22, DType::f32), v = leaf(s, 23, DType::f32);
  Tensor want = ops::causal_attention(q, k, v);
  const bool tiles = kernels::attention_low_precision_native(kCPU)(kCPU, DType::bf16);
  EXPECT_FALSE(kernels::attention_low_precision_native(kCPU)(kCPU, DType::f16));
  {
    AutocastGuard guard(DType::bf16);
    Tensor y = ops::causal_attention(ops::cast(q, DType::bf16), k, v);  // mixed inputs meet in one type
    EXPECT_EQ(y.dtype(), tiles ? DType::bf16 : DType::f32);
    expect_close(ops::cast(y, DType::f32), want, 2e-2, 2e-2);
  }
  AutocastGuard guard(DType::f16);
  Tensor y = ops::causal_attention(ops::cast(q, DType::f16), k, v);
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_close(y, want, 2e-2, 2e-2);
}

TEST(CausalAttention, EmptySequence) {
  Tensor q = leaf({2, 3, 0, 4}, 24);
  Tensor y = ops::causal_attention(q, q, q);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 0, 4}));
  auto g = grad({y}, {q}, {Tensor::zeros({2, 3, 0, 4}, DType::f64)});
  EXPECT_EQ(g[0].numel(), 0);
}

TEST(CausalAttention, ShapeErrors) {
  Tensor a = Tensor::zeros({1, 2, 3, 4}), b = Tensor::zeros({1, 2, 4, 4});
  EXPECT_THROW(ops::causal_attention(a, b, a), ValueError);
  EXPECT_THROW(ops::causal_attention(Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 3, 4})),
               ValueError);
  EXPECT_THROW(ops::causal_attention(a, a, Tensor::zeros({1, 2, 3, 4}, DType::f64)), ValueError);
}

}  // namespace
}  // namespace tandem::testing
