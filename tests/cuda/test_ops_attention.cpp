// causal attention on the CUDA backend (the fused forward and the dQ / dK,dV kernels) vs the CPU:
// T not a multiple of any tile, T = 1, head_dim 32/64/128 and odd ones, B*H > 1, 16-bit inputs; and
// cross-entropy at GPT-2's vocabulary.
#include <array>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/attention.h"
#include "runtime/env_settings.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class AttentionOps : public BackendTest {};

struct Outputs {
  Tensor out, lse, dq, dk, dv;
};

Outputs run(Device dev, const Shape& s, DType dt, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
            std::optional<double> scale = std::nullopt) {
  kernels::AttentionShape a;
  a.b = s[0]; a.h = s[1]; a.t = s[2]; a.d = s[3];
  a.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(a.d));
  const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
  Outputs o{Tensor::empty(s, dt, dev), Tensor::empty({s[0], s[1], s[2]}, acc, dev), Tensor::empty(s, dt, dev),
            Tensor::empty(s, dt, dev), Tensor::empty(s, dt, dev)};
  Tensor qd = q.to(dev), kd = k.to(dev), vd = v.to(dev), dod = dout.to(dev);
  kernels::attention_forward(dev)(qd, kd, vd, o.out, o.lse, a);
  kernels::attention_backward(dev)(qd, kd, vd, o.out, o.lse, dod, o.dq, o.dk, o.dv, a);
  return o;
}

void compare(const Outputs& got, const Outputs& want, double rtol, const std::string& what) {
  expect_close(got.out, want.out, rtol, what + " out");
  expect_close(got.lse, want.lse, rtol, what + " lse");
  expect_close(got.dq, want.dq, rtol * 4, what + " dq");
  expect_close(got.dk, want.dk, rtol * 4, what + " dk");
  expect_close(got.dv, want.dv, rtol * 4, what + " dv");
}

TEST_P(AttentionOps, MatchesCpuAcrossShapes) {
  // T: 1, under one warp's tile, not a multiple of 32 or of the row tiles; D: 32/64/128 and odd.
  for (Shape s : {Shape{1, 1, 1, 32}, Shape{2, 3, 45, 64}, Shape{1, 2, 70, 128}, Shape{1, 1, 33, 32},
                  Shape{3, 1, 17, 7}, Shape{1, 1, 5, 100}, Shape{1, 2, 0, 16}}) {
    const DType dt = DType::f32;
    Tensor q = random_tensor(s, dt, 1), k = random_tensor(s, dt, 2), v = random_tensor(s, dt, 3),
           dout = random_tensor(s, dt, 4);
    compare(run(dev(), s, dt, q, k, v, dout), run(kCPU, s, dt, q, k, v, dout), tol(2e-5, 1e-4), shape_str(s));
  }
}

TEST_P(AttentionOps, DoubleAndSixteenBitInputs) {
  const Shape s{2, 2, 37, 32};
  for (DType dt : {DType::f64, DType::bf16, DType::f16}) {
    Tensor q = random_tensor(s, dt, 5), k = random_tensor(s, dt, 6), v = random_tensor(s, dt, 7),
           dout = random_tensor(s, dt, 8);
    const double rtol = dt == DType::f64 ? 1e-12 : dt == DType::bf16 ? 2e-2 : 4e-3;
    compare(run(dev(), s, dt, q, k, v, dout), run(kCPU, s, dt, q, k, v, dout), std::max(rtol, tol(0, 0)),
            dtype_name(dt));
  }
}

// bf16 and f16 at head dimensions 16/32/64/128 take the tensor-core kernels (attention_mma.cu):
// T = 1, T under one 16-row fragment, T crossing the 64-row tiles and not a multiple of them, B*H > 1.
// Their probabilities and dS are rounded to the input type before the second product (as in
// flash-attention), so they match the CPU (which keeps them in f32) to a few units of that type.
TEST_P(AttentionOps, TensorCoreKernelsMatchCpu) {
  for (DType dt : {DType::bf16, DType::f16})
    // 200 and 130 rows: tiles that need no mask, and streams of several tiles through both stages.
    for (Shape s : {Shape{1, 1, 1, 64}, Shape{2, 1, 13, 16}, Shape{1, 2, 70, 64}, Shape{1, 1, 65, 32},
                    Shape{1, 1, 40, 128}, Shape{1, 2, 200, 64}, Shape{1, 1, 130, 128}}) {
      Tensor q = random_tensor(s, dt, 21), k = random_tensor(s, dt, 22), v = random_tensor(s, dt, 23),
             dout = random_tensor(s, dt, 24);
      compare(run(dev(), s, dt, q, k, v, dout), run(kCPU, s, dt, q, k, v, dout), 2 * ulps(dt),
              std::string(dtype_name(dt)) + " " + shape_str(s));
    }
}

// The forward with 32 rows a warp (TANDEM_ATTENTION_FORWARD_ROWS=32: two row tiles sharing each key
// and value fragment, 128-row blocks) gives the bits of the 16-row one: each row's arithmetic is
// the same. T = 1, within one block, across blocks and not a multiple of 64 or 128, head dims 16 to
// 64 (and 128, which keeps 16 rows), bf16 and f16, B*H > 1; then the token-major path GPT takes.
TEST_P(AttentionOps, ForwardWithThirtyTwoRowsAWarpGivesTheSameBits) {
  struct RowsEnv : env::ScopedValue {  // sets the switch for the calls in its scope
    explicit RowsEnv(const char* rows) : env::ScopedValue("TANDEM_ATTENTION_FORWARD_ROWS", rows) {}
  };
  for (DType dt : {DType::bf16, DType::f16})
    for (Shape s : {Shape{1, 1, 1, 64}, Shape{2, 1, 13, 16}, Shape{1, 2, 100, 64}, Shape{1, 1, 129, 32},
                    Shape{1, 2, 300, 64}, Shape{1, 1, 200, 128}}) {
      Tensor q = random_tensor(s, dt, 25), k = random_tensor(s, dt, 26), v = random_tensor(s, dt, 27),
             dout = random_tensor(s, dt, 28);
      Outputs sixteen = run(dev(), s, dt, q, k, v, dout), thirty_two;
      {
        RowsEnv rows("32");
        thirty_two = run(dev(), s, dt, q, k, v, dout);
      }
      const std::string what = std::string(dtype_name(dt)) + " " + shape_str(s) + " 32 rows a warp";
      expect_close(thirty_two.out, sixteen.out.to(kCPU), 0, what + " out");
      expect_close(thirty_two.lse, sixteen.lse.to(kCPU), 0, what + " lse");
    }
  Tensor x = random_tensor({2, 150, 3 * 2 * 64}, DType::f32, 29);
  auto self_attention = [&] {
    AutocastGuard guard(DType::bf16);
    return ops::cast(ops::causal_self_attention(x.to(dev()), 2), DType::f32).to(kCPU);
  };
  const Tensor sixteen = self_attention();
  RowsEnv rows("32");
  expect_close(self_attention(), sixteen, 0, "causal_self_attention, 32 rows a warp");
  RowsEnv bad("64");
  EXPECT_THROW(self_attention(), Error);
}

// The tensor-core kernels take row maxima of unscaled scores, right for a positive scale only: a
// negative or zero scale on shapes they would take runs the SIMT kernels, and matches the CPU. (The
// scores span hundreds of log2 units here, so a shift by the wrong extreme would overflow.)
TEST_P(AttentionOps, NonPositiveScalesOnTensorCoreShapesMatchCpu) {
  const Shape s{1, 2, 70, 64};
  for (double scale : {-0.3, 0.0}) {
    Tensor q = random_tensor(s, DType::bf16, 31, -8.0, 8.0), k = random_tensor(s, DType::bf16, 32),
           v = random_tensor(s, DType::bf16, 33), dout = random_tensor(s, DType::bf16, 34);
    compare(run(dev(), s, DType::bf16, q, k, v, dout, scale), run(kCPU, s, DType::bf16, q, k, v, dout, scale), 2e-2,
            "scale " + std::to_string(scale));
  }
}

// Runs attention on random q, k, v, dout (seeds from `seed`) as they are, and again with the last
// key and value of every head set to `key` and `value`.
std::pair<Outputs, Outputs> run_with_last_key_set(Device dev, const Shape& s, DType dt, uint32_t seed, float key,
                                                  float value) {
  const int64_t t = s[2], d = s[3];
  Tensor q = random_tensor(s, dt, seed), k = random_tensor(s, dt, seed + 1), v = random_tensor(s, dt, seed + 2),
         dout = random_tensor(s, dt, seed + 3);
  std::vector<float> kv = k.to_vector<float>(), vv = v.to_vector<float>();
  for (int64_t h = 0; h < s[1]; ++h)
    for (int64_t c = 0; c < d; ++c) {
      kv[static_cast<size_t>((h * t + t - 1) * d + c)] = key;
      vv[static_cast<size_t>((h * t + t - 1) * d + c)] = value;
    }
  return {run(dev, s, dt, q, k, v, dout),
          run(dev, s, dt, q, Tensor::from_vector(kv, s, dt), Tensor::from_vector(vv, s, dt), dout)};
}

// Every row before each head's last gives the same bits in both runs (out, lse, dq; dk and dv of
// earlier keys do see the last query, which sees the changed key), and a finite one in the second.
void expect_rows_before_last_unchanged(const Outputs& a, const Outputs& b, const Shape& s) {
  const int64_t t = s[2], d = s[3], rows = s[1] * t;
  const auto a_out = a.out.to(kCPU).to_vector<float>(), b_out = b.out.to(kCPU).to_vector<float>();
  const auto a_lse = a.lse.to(kCPU).to_vector<float>(), b_lse = b.lse.to(kCPU).to_vector<float>();
  const auto a_dq = a.dq.to(kCPU).to_vector<float>(), b_dq = b.dq.to(kCPU).to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    if (r % t == t - 1) continue;  // the last query sees the changed key
    EXPECT_EQ(a_lse[static_cast<size_t>(r)], b_lse[static_cast<size_t>(r)]) << "lse row " << r;
    for (int64_t c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(r * d + c);
      ASSERT_TRUE(std::isfinite(b_out[i]) && std::isfinite(b_dq[i])) << "row " << r << " column " << c;
      EXPECT_EQ(a_out[i], b_out[i]) << "out row " << r << " column " << c;
      EXPECT_EQ(a_dq[i], b_dq[i]) << "dq row " << r << " column " << c;
    }
  }
}

// Causality on the tensor-core path: the last key and value made huge (finite: a masked probability
// is 0 there, and 0 * inf would be NaN in the product) change no earlier row, bit for bit.
TEST_P(AttentionOps, TensorCoreFutureKeysAndValuesChangeNoEarlierRow) {
  const Shape s{1, 2, 70, 64};  // T crosses a 64-key tile
  const auto [before, after] = run_with_last_key_set(dev(), s, DType::bf16, 31, 3e4f, -3e4f);
  expect_rows_before_last_unchanged(before, after, s);
  // The last row does see them: the check above is not vacuous.
  EXPECT_NE(before.lse.to(kCPU).to_vector<float>()[static_cast<size_t>(s[2] - 1)],
            after.lse.to(kCPU).to_vector<float>()[static_cast<size_t>(s[2] - 1)]);
}

// Under autocast the device runs attention in the autocast type (the tensor-core kernels); the
// gradients reach the f32 inputs in f32.
TEST_P(AttentionOps, AutocastRunsSixteenBitOnTheDevice) {
  const Shape s{1, 2, 21, 32};
  Tensor q = random_tensor(s, DType::f32, 41), k = random_tensor(s, DType::f32, 42), v = random_tensor(s, DType::f32, 43);
  Tensor want = ops::causal_attention(q, k, v);
  Tensor qd = q.to(dev()), kd = k.to(dev()), vd = v.to(dev());
  qd.set_requires_grad(true);
  Tensor y;
  {
    AutocastGuard guard(DType::bf16);
    y = ops::causal_attention(qd, kd, vd);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  expect_close(ops::cast(y, DType::f32).to(kCPU), want, 4 * ulps(DType::bf16), "bf16 under autocast");
  Tensor gq = grad({y}, {qd}, {Tensor::ones(s, DType::bf16, dev())})[0];
  EXPECT_EQ(gq.dtype(), DType::f32);
}

// The SIMT kernels score whole tiles and mask by selection: a future key or value that is infinite
// must still change nothing before it.
TEST_P(AttentionOps, InfiniteFutureKeysAndValuesChangeNoEarlierRow) {
  const Shape s{1, 2, 40, 32};  // T crosses a 32-key tile
  const auto [finite, inf] = run_with_last_key_set(dev(), s, DType::f32, 11, INFINITY, -INFINITY);
  expect_rows_before_last_unchanged(finite, inf, s);
}

TEST_P(AttentionOps, HeadDimBeyondTheKernelIsRejected) {
  const Shape s{1, 1, 4, 160};
  Tensor q = random_tensor(s, DType::f32, 9);
  EXPECT_THROW(run(dev(), s, DType::f32, q, q, q, q), NotSupportedError);
}

// The differentiable path on the device: a fused qkv projection's output split into heads, attention,
// heads merged back; gradients through all of it (split_qkv and merge_heads are permutes there).
TEST_P(AttentionOps, OpsWithHeadLayoutsMatchCpu) {
  const int64_t b = 2, t = 19, h = 2, d = 32;
  Tensor x = random_tensor({b, t, 3 * h * d}, DType::f32, 10), r = random_tensor({b, t, h * d}, DType::f32, 11);
  auto run_on = [&](Device dv) {
    Tensor xd = x.to(dv);
    xd.set_requires_grad(true);
    auto qkv = ops::split_qkv(xd, h);
    Tensor y = ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
    Tensor gx = grad({y}, {xd}, {r.to(dv)})[0];
    return std::make_pair(y.to(kCPU), gx.to(kCPU));
  };
  auto [y, gx] = run_on(dev());
  auto [y_cpu, gx_cpu] = run_on(kCPU);
  expect_close(y, y_cpu, tol(2e-5, 1e-4), "y");
  expect_close(gx, gx_cpu, tol(1e-4, 4e-4), "dx");
}

// causal_self_attention (GPT's path) on the device, where the kernels read q, k, v from the qkv rows
// and write merged heads: the composition's values and gradients exactly (the same arithmetic on the
// same data), in f32 (SIMT kernels) and under bf16 autocast (tensor cores for head dims 16 and 64;
// head dim 6 keeps bf16 on the SIMT kernels, with rows too short for 4-element loads), and the CPU's
// to the kernels' rounding.
TEST_P(AttentionOps, SelfAttentionEqualsTheCompositionOnTheDevice) {
  for (auto [b, t, h, d] : std::vector<std::array<int64_t, 4>>{{2, 37, 2, 64}, {2, 70, 2, 16}, {1, 21, 3, 6}})
    for (bool autocast : {false, true}) {
      SCOPED_TRACE("t " + std::to_string(t) + " h " + std::to_string(h) + " d " + std::to_string(d));
      Tensor x = random_tensor({b, t, 3 * h * d}, DType::f32, 12), r = random_tensor({b, t, h * d}, DType::f32, 13);
      auto run_on = [&](Device dv, bool fused) {
        Tensor xd = x.to(dv);
        xd.set_requires_grad(true);
        Tensor y;
        {
          std::optional<AutocastGuard> guard;
          if (autocast) guard.emplace(DType::bf16);
          if (fused) {
            y = ops::causal_self_attention(xd, h);
          } else {
            auto qkv = ops::split_qkv(xd, h);
            y = ops::merge_heads(ops::causal_attention(qkv[0], qkv[1], qkv[2]));
          }
        }
        Tensor gx = grad({y}, {xd}, {ops::cast(r, y.dtype()).to(dv)})[0];
        return std::make_pair(ops::cast(y, DType::f32).to(kCPU), gx.to(kCPU));
      };
      const std::string what = autocast ? "bf16 autocast" : "f32";
      auto [y, gx] = run_on(dev(), true);
      auto [y2, gx2] = run_on(dev(), false);
      expect_close(y, y2, 0, what + " y vs composition");
      expect_close(gx, gx2, 0, what + " dx vs composition");
      auto [yc, gxc] = run_on(kCPU, true);
      const double rtol = autocast ? 4 * ulps(DType::bf16) : tol(2e-5, 1e-4);
      expect_close(y, yc, rtol, what + " y vs cpu");
      expect_close(gx, gxc, autocast ? 8 * ulps(DType::bf16) : tol(1e-4, 4e-4), what + " dx vs cpu");
    }
}

// The GPT's loss at GPT-2's vocabulary (and its padded size): one block per row over 50k classes.
TEST_P(AttentionOps, CrossEntropyAtGpt2VocabMatchesCpu) {
  for (int64_t vocab : {int64_t(50257), int64_t(50304)}) {
    const int64_t n = 3;
    Tensor logits = random_tensor({n, vocab}, DType::f32, 12, -6, 6);
    Tensor target = Tensor::from_vector(std::vector<int64_t>{0, vocab - 1, 31337}, {n});
    auto run_on = [&](Device dv) {
      Tensor x = logits.to(dv);
      x.set_requires_grad(true);
      Tensor loss = ops::cross_entropy(x, target.to(dv));
      return std::make_pair(loss.to(kCPU), grad({loss}, {x})[0].to(kCPU));
    };
    auto [loss, gx] = run_on(dev());
    auto [loss_cpu, gx_cpu] = run_on(kCPU);
    expect_close(loss, loss_cpu, tol(1e-5), "loss at vocab " + std::to_string(vocab));
    expect_close(gx, gx_cpu, tol(1e-5), "dlogits at vocab " + std::to_string(vocab));
  }
}

TANDEM_BACKEND_SUITE(AttentionOps);

}  // namespace
}  // namespace tandem::testing
