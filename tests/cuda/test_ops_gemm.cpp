// GEMM epilogues on the CUDA backend (cuBLASLt's fused ones on a GPU, or our kernels after the
// product where cuBLASLt has none, and always under the emulator) against the CPU backend's: the
// bias, GELU with its stored input, the bias gradient as op(A)'s row sums, 16-bit operands summed
// into an f32 C (wide_c, alone and with the row sums), GELU's backward on C with and without C's
// column sums; then linear, linear_gelu and mlp_gelu forward and backward through the ops, grad()
// and backward() (the weight gradient's GEMM adding into .grad).
#include <algorithm>
#include <array>
#include <optional>

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/gemm.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class GemmOps : public BackendTest {};

enum class Case { Bias, BiasGelu, Gelu, RowSums, RowSumsTransposed, WideC, WideCRowSums, DGelu, DGeluColSums };

const char* case_name(Case c) {
  switch (c) {
    case Case::Bias: return "bias";
    case Case::BiasGelu: return "bias+gelu";
    case Case::Gelu: return "gelu";
    case Case::RowSums: return "a_row_sums";
    case Case::RowSumsTransposed: return "a_row_sums of A^T";
    case Case::WideC: return "f32 C, beta 1";
    case Case::WideCRowSums: return "f32 C, beta 1, a_row_sums of A^T";
    case Case::DGelu: return "dgelu";
    case Case::DGeluColSums: return "dgelu+c_col_sums";
  }
  return "";
}

// One GEMM with the epilogue on `d`; returns C, then pre or the row sums (undefined when unused).
// With sums_into (the sums' cases), the sums are added to a copy of it (GemmArgs::sums_add).
std::pair<Tensor, Tensor> run_gemm(Device d, Case c, DType dt, int64_t m, int64_t n, int64_t k,
                                   const Tensor& sums_into = Tensor()) {
  const bool wide = c == Case::WideC || c == Case::WideCRowSums;
  const bool ta = c == Case::RowSumsTransposed || c == Case::WideCRowSums;
  Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, dt, 11, -1, 1).to(d);
  Tensor b = random_tensor({n, k}, dt, 12, -1, 1).to(d);  // op(B) = B^T, as a linear's weight
  Tensor bias = random_tensor({n}, dt, 13, -1, 1).to(d);
  // beta 0: its contents must not matter; wide: an f32 .grad the product is added to (beta 1).
  Tensor out = random_tensor({m, n}, wide ? DType::f32 : dt, 14).to(d);
  Tensor extra;
  kernels::GemmArgs g;
  g.dtype = dt;
  g.wide_c = wide;
  g.beta = wide ? 1.0 : 0.0;
  g.trans_a = ta;
  g.trans_b = true;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data_ptr();
  g.lda = ta ? m : k;
  g.b = b.data_ptr();
  g.ldb = k;
  g.c = out.data_ptr();
  g.ldc = n;
  if (c == Case::Bias || c == Case::BiasGelu) g.bias = bias.data_ptr();
  if (c == Case::BiasGelu || c == Case::Gelu) {
    extra = Tensor::zeros({m, n}, dt, d);
    g.pre = extra.data_ptr();
    g.gelu = true;
  }
  if (c == Case::RowSums || c == Case::RowSumsTransposed || c == Case::WideCRowSums) {
    extra = sums_into.defined() ? sums_into.to(d).clone() : Tensor::zeros({m}, dt, d);
    g.a_row_sums = extra.data_ptr();
  }
  Tensor pre = random_tensor({m, n}, dt, 15, -3, 3).to(d);  // GELU's input, read by dgelu
  if (c == Case::DGelu || c == Case::DGeluColSums) g.dgelu_pre = pre.data_ptr();
  if (c == Case::DGeluColSums) {
    extra = sums_into.defined() ? sums_into.to(d).clone() : random_tensor({n}, dt, 16).to(d);  // all written
    g.c_col_sums = extra.data_ptr();
  }
  g.sums_add = sums_into.defined();
  kernels::gemm(d)(d, g);
  return {out, extra};
}

// 16-bit column sums of C (m rows): each of C's values may differ from the CPU's by a rounding or
// two (the GPU applies GELU's derivative to the f32 accumulator; cuBLASLt's epilogues sum
// unrounded values), so a sum may differ by that relative error of the sum of its terms' magnitudes,
// which cancellation can make far larger than the sum itself.
void expect_column_sums_close(const Tensor& got, const Tensor& want, const Tensor& c_cpu, double rel, double rtol,
                              const std::string& what) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>(), c = c_cpu.to_vector<double>();
  const size_t n = w.size(), m = n ? c.size() / n : 0;
  ASSERT_EQ(g.size(), n) << what;
  int bad = 0;
  for (size_t j = 0; j < n; ++j) {
    double magnitude = 0;
    for (size_t i = 0; i < m; ++i) magnitude += std::abs(c[i * n + j]);
    const double bound = rel * magnitude + rtol * (std::abs(w[j]) + 1.0);
    if (!(std::abs(g[j] - w[j]) <= bound) && bad++ < 5)
      ADD_FAILURE() << what << " column " << j << ": got " << g[j] << ", want " << w[j] << " (bound " << bound << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " column sums differ";
}

TEST_P(GemmOps, EpiloguesMatchCpu) {
  // n = 7: a leading dimension cuBLASLt's GELU input refuses (our kernels run); the others fuse.
  const std::vector<std::array<int64_t, 3>> shapes{{5, 7, 3}, {16, 24, 40}, {33, 64, 48}, {1, 8, 1}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (Case c : {Case::Bias, Case::BiasGelu, Case::Gelu, Case::RowSums, Case::RowSumsTransposed, Case::WideC,
                   Case::WideCRowSums, Case::DGelu, Case::DGeluColSums})
      for (const auto& [m, n, k] : shapes) {
        const bool wide = c == Case::WideC || c == Case::WideCRowSums;
        if (wide && !is_low_precision(dt)) continue;  // wide_c is for 16-bit operands
        const std::string what = std::string(dtype_name(dt)) + " " + case_name(c) + " m=" + std::to_string(m) +
                                 " n=" + std::to_string(n) + " k=" + std::to_string(k);
        auto [c_cpu, e_cpu] = run_gemm(kCPU, c, dt, m, n, k);
        auto [c_dev, e_dev] = run_gemm(dev(), c, dt, m, n, k);
        // A GPU applies the epilogue to the f32 accumulator, the CPU to C rounded to dt: 16-bit
        // results may differ by a rounding of each.
        // An f32 C (wide) holds f32 sums of exact products: only the order of the sums differs.
        const double low = wide ? 0 : dt == DType::bf16 ? 2e-2 : dt == DType::f16 ? 3e-3 : 0;
        // On the CPU, f32 GELU uses Eigen's vectorised tanh (saturating early), the kernels tanhf.
        // GELU's derivative multiplies tanh's error by up to ~|v|: Eigen's tanh on the CPU and tanhf
        // in the kernels (or cuBLASLt's) differ by ~2e-5 there.
        const bool dgelu = c == Case::DGelu || c == Case::DGeluColSums;
        const double f32_tol = dgelu ? 5e-5 : 2e-6;
        const double sim = dt == DType::f32 || wide ? f32_tol : ulps(dt);
        const double t = low > 0 ? tol(sim, low) : tol(sim, dt == DType::f64 ? 1e-12 : std::max(1e-5, f32_tol));
        expect_close(c_dev, c_cpu, t, what + " C");
        // Row sums: the GPU's reduction order differs from the CPU's (and sums k products, not one).
        const bool sums = c == Case::RowSums || c == Case::RowSumsTransposed || c == Case::WideCRowSums ||
                          c == Case::DGeluColSums;
        // The sums are in dt, over k (or m) items in another order (the column sums' splits).
        const double t_sums = std::max({t, tol(ulps(dt), 1e-4), dt == DType::f64 ? 1e-13 : 0.0});
        if (!e_cpu.defined()) continue;
        if (c == Case::DGeluColSums && low > 0)
          expect_column_sums_close(e_dev, e_cpu, c_cpu, tol(0, dt == DType::bf16 ? 0x1p-8 : 0x1p-11), t_sums,
                                   what + " sums");
        else
          expect_close(e_dev, e_cpu, sums ? t_sums : t, what + " pre / sums");
      }
}

// sums_add: the epilogue's sums added to an array in their own dtype (a bias's .grad: f32, f64 for
// f64) instead of written in the operands'. Where both ways run our kernels (the CPU, the emulator,
// f64 everywhere), C is the same and f32/f64 sums are exactly what they hold plus the written sums.
// On a GPU the written sums may be cuBLASLt's (its BGRADB epilogue: another product algorithm,
// another order of the sums), so there C agrees to a rounding of dt. Otherwise (16-bit, or f32 on a
// GPU) the sums are f32 sums, unrounded, within f32 rounding of the f64 sums of the values (of op(A)'s
// rows, or of C's columns as C holds them).
TEST_P(GemmOps, EpilogueSumsAddIntoTheirOwnDtype) {
  const std::vector<std::array<int64_t, 3>> shapes{{5, 7, 3}, {33, 64, 48}, {70, 24, 300}};
  for (Device d : {kCPU, dev()})
    for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
      for (Case c : {Case::RowSums, Case::RowSumsTransposed, Case::WideCRowSums, Case::DGeluColSums})
        for (const auto& [m, n, k] : shapes) {
          const bool wide = c == Case::WideCRowSums;
          if (wide && !is_low_precision(dt)) continue;
          const std::string what = std::string(d.str()) + " " + dtype_name(dt) + " " + case_name(c) +
                                   " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
          const DType sd = dt == DType::f64 ? DType::f64 : DType::f32;
          const int64_t len = c == Case::DGeluColSums ? n : m;
          const Tensor before = random_tensor({len}, sd, 17, -1, 1);
          auto [c_w, written] = run_gemm(d, c, dt, m, n, k);
          auto [c_a, added] = run_gemm(d, c, dt, m, n, k, before);
          ASSERT_EQ(added.dtype(), sd) << what;
          const bool ours_both_ways = d == kCPU || emulated() || dt == DType::f64;
          expect_close(c_a, c_w, ours_both_ways ? 0 : ulps(dt), what + " C beside the sums");
          if (!is_low_precision(dt) && ours_both_ways) {
            expect_close(added, ops::add(before.to(d), written), 0, what + " sums added");
            continue;
          }
          // The f64 sums of the 16-bit values the epilogue summed, and the sizes of their terms.
          const bool ta = c == Case::RowSumsTransposed || c == Case::WideCRowSums;
          const std::vector<double> a =
              random_tensor(ta ? Shape{k, m} : Shape{m, k}, dt, 11, -1, 1).to_vector<double>();
          const std::vector<double> cv = c_a.to_vector<double>();
          std::vector<double> want(static_cast<size_t>(len), 0.0), size(static_cast<size_t>(len), 0.0);
          for (int64_t i = 0; i < len; ++i)
            for (int64_t p = 0; p < (c == Case::DGeluColSums ? m : k); ++p) {
              const double v = c == Case::DGeluColSums ? cv[p * n + i] : ta ? a[p * m + i] : a[i * k + p];
              want[i] += v;
              size[i] += std::abs(v);
            }
          // A sum rounded to 16 bits first would be off by up to 2^-9 of itself (2^-12 for f16).
          const std::vector<double> got = added.to_vector<double>(), was = before.to_vector<double>();
          for (int64_t i = 0; i < len; ++i)
            EXPECT_NEAR(got[i], was[i] + want[i], 1e-6 * (size[i] + 2)) << what << " entry " << i;
        }
}

// linear and linear_gelu, forward and all three gradients, f32 and under bf16 autocast.
TEST_P(GemmOps, LinearAndLinearGeluMatchCpu) {
  for (bool gelu : {false, true})
    for (bool bf16 : {false, true}) {
      const std::string what = std::string(gelu ? "linear_gelu" : "linear") + (bf16 ? " bf16" : " f32");
      auto run = [&](Device d) {
        Tensor x = random_tensor({3, 5, 24}, DType::f32, 21, -1, 1).to(d).set_requires_grad();
        Tensor w = random_tensor({40, 24}, DType::f32, 22, -0.3, 0.3).to(d).set_requires_grad();
        Tensor b = random_tensor({40}, DType::f32, 23, -0.5, 0.5).to(d).set_requires_grad();
        Tensor dy = random_tensor({3, 5, 40}, bf16 ? DType::bf16 : DType::f32, 24, -1, 1).to(d);
        Tensor y;
        {
          std::optional<AutocastGuard> guard;
          if (bf16) guard.emplace(DType::bf16);
          y = gelu ? ops::linear_gelu(x, w, b) : ops::linear(x, w, b);
        }
        auto g = grad({y}, {x, w, b}, {dy});
        return std::vector<Tensor>{y, g[0], g[1], g[2]};
      };
      auto cpu = run(kCPU), dev_out = run(dev());
      const char* names[] = {"y", "dx", "dw", "db"};
      for (int i = 0; i < 4; ++i)
        expect_close(dev_out[i], cpu[i], bf16 ? tol(2e-2, 3e-2) : tol(1e-6, 1e-4), what + " " + names[i]);
    }
}

// mlp_gelu forward and every gradient (backward() twice: .grad made, then added to), f32 and under
// bf16 autocast, the device against the CPU.
TEST_P(GemmOps, MlpGeluMatchesCpu) {
  for (bool bf16 : {false, true}) {
    const std::string what = std::string("mlp_gelu") + (bf16 ? " bf16" : " f32");
    auto run = [&](Device d) {
      std::vector<Tensor> p{random_tensor({3, 5, 24}, DType::f32, 41, -1, 1).to(d).set_requires_grad(),
                            random_tensor({48, 24}, DType::f32, 42, -0.3, 0.3).to(d).set_requires_grad(),
                            random_tensor({48}, DType::f32, 43, -0.5, 0.5).to(d).set_requires_grad(),
                            random_tensor({16, 48}, DType::f32, 44, -0.3, 0.3).to(d).set_requires_grad(),
                            random_tensor({16}, DType::f32, 45, -0.5, 0.5).to(d).set_requires_grad()};
      Tensor dy = random_tensor({3, 5, 16}, bf16 ? DType::bf16 : DType::f32, 46, -1, 1).to(d);
      Tensor y;
      for (int step = 0; step < 2; ++step) {
        {
          std::optional<AutocastGuard> guard;
          if (bf16) guard.emplace(DType::bf16);
          y = ops::mlp_gelu(p[0], p[1], p[2], p[3], p[4]);
        }
        y.backward(dy);
      }
      std::vector<Tensor> out{y};
      for (const Tensor& t : p) out.push_back(t.grad());
      return out;
    };
    auto cpu = run(kCPU), dev_out = run(dev());
    const char* names[] = {"y", "dx", "dw_fc", "db_fc", "dw_proj", "db_proj"};
    for (size_t i = 0; i < cpu.size(); ++i)
      expect_close(dev_out[i], cpu[i], bf16 ? tol(2e-2, 3e-2) : tol(1e-5, 1e-4), what + " " + names[i]);
  }
}

// backward() twice: the weight's gradient is added into its .grad by the GEMM itself (an f32 .grad
// under bf16 autocast: wide_c), the first time into the zeros made for it; the device equals the CPU.
TEST_P(GemmOps, LinearBackwardAddsIntoGradMatchesCpu) {
  for (bool gelu : {false, true})
    for (bool bf16 : {false, true}) {
      const std::string what = std::string(gelu ? "linear_gelu" : "linear") + (bf16 ? " bf16" : " f32");
      auto run = [&](Device d) {
        Tensor x = random_tensor({3, 5, 24}, DType::f32, 31, -1, 1).to(d);
        Tensor w = random_tensor({40, 24}, DType::f32, 32, -0.3, 0.3).to(d).set_requires_grad();
        Tensor b = random_tensor({40}, DType::f32, 33, -0.5, 0.5).to(d).set_requires_grad();
        Tensor dy = random_tensor({3, 5, 40}, bf16 ? DType::bf16 : DType::f32, 34, -1, 1).to(d);
        for (int step = 0; step < 2; ++step) {
          Tensor y;
          {
            std::optional<AutocastGuard> guard;
            if (bf16) guard.emplace(DType::bf16);
            y = gelu ? ops::linear_gelu(x, w, b) : ops::linear(x, w, b);
          }
          y.backward(dy);
        }
        return std::vector<Tensor>{w.grad(), b.grad()};
      };
      auto cpu = run(kCPU), dev_out = run(dev());
      EXPECT_EQ(dev_out[0].dtype(), DType::f32);
      expect_close(dev_out[0], cpu[0], bf16 ? tol(2e-2, 3e-2) : tol(1e-6, 1e-4), what + " w.grad");
      expect_close(dev_out[1], cpu[1], bf16 ? tol(2e-2, 3e-2) : tol(1e-6, 1e-4), what + " b.grad");
    }
}

TANDEM_BACKEND_SUITE(GemmOps);

}  // namespace
}  // namespace tandem::testing
