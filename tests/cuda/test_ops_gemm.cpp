// GEMM epilogues on the CUDA backend (cuBLASLt's fused ones on a GPU, or our kernels after the
// product where cuBLASLt has none, and always under the emulator) against the CPU backend's: the
// bias, GELU with its stored input, the bias gradient as op(A)'s row sums; then linear and
// linear_gelu forward and backward through the ops.
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

enum class Case { Bias, BiasGelu, Gelu, RowSums, RowSumsTransposed };

const char* case_name(Case c) {
  switch (c) {
    case Case::Bias: return "bias";
    case Case::BiasGelu: return "bias+gelu";
    case Case::Gelu: return "gelu";
    case Case::RowSums: return "a_row_sums";
    case Case::RowSumsTransposed: return "a_row_sums of A^T";
  }
  return "";
}

// One GEMM with the epilogue on `d`; returns C, then pre or the row sums (undefined when unused).
std::pair<Tensor, Tensor> run_gemm(Device d, Case c, DType dt, int64_t m, int64_t n, int64_t k) {
  const bool ta = c == Case::RowSumsTransposed;
  Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, dt, 11, -1, 1).to(d);
  Tensor b = random_tensor({n, k}, dt, 12, -1, 1).to(d);  // op(B) = B^T, as a linear's weight
  Tensor bias = random_tensor({n}, dt, 13, -1, 1).to(d);
  Tensor out = random_tensor({m, n}, dt, 14).to(d);  // beta 0: its contents must not matter
  Tensor extra;
  kernels::GemmArgs g;
  g.dtype = dt;
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
  if (c == Case::RowSums || c == Case::RowSumsTransposed) {
    extra = Tensor::zeros({m}, dt, d);
    g.a_row_sums = extra.data_ptr();
  }
  kernels::gemm(d)(d, g);
  return {out, extra};
}

TEST_P(GemmOps, EpiloguesMatchCpu) {
  // n = 7: a leading dimension cuBLASLt's GELU input refuses (our kernels run); the others fuse.
  const std::vector<std::array<int64_t, 3>> shapes{{5, 7, 3}, {16, 24, 40}, {33, 64, 48}, {1, 8, 1}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (Case c : {Case::Bias, Case::BiasGelu, Case::Gelu, Case::RowSums, Case::RowSumsTransposed})
      for (const auto& [m, n, k] : shapes) {
        const std::string what = std::string(dtype_name(dt)) + " " + case_name(c) + " m=" + std::to_string(m) +
                                 " n=" + std::to_string(n) + " k=" + std::to_string(k);
        auto [c_cpu, e_cpu] = run_gemm(kCPU, c, dt, m, n, k);
        auto [c_dev, e_dev] = run_gemm(dev(), c, dt, m, n, k);
        // A GPU applies the epilogue to the f32 accumulator, the CPU to C rounded to dt: 16-bit
        // results may differ by a rounding of each.
        const double low = dt == DType::bf16 ? 2e-2 : dt == DType::f16 ? 3e-3 : 0;
        // On the CPU, f32 GELU uses Eigen's vectorised tanh (saturating early), the kernels tanhf.
        const double sim = dt == DType::f32 ? 2e-6 : ulps(dt);
        const double t = low > 0 ? tol(sim, low) : tol(sim, dt == DType::f64 ? 1e-12 : 1e-5);
        expect_close(c_dev, c_cpu, t, what + " C");
        // Row sums: the GPU's reduction order differs from the CPU's (and sums k products, not one).
        const bool sums = c == Case::RowSums || c == Case::RowSumsTransposed;
        if (e_cpu.defined()) expect_close(e_dev, e_cpu, sums ? std::max(t, tol(ulps(dt), 1e-4)) : t, what + " pre / sums");
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

TANDEM_BACKEND_SUITE(GemmOps);

}  // namespace
}  // namespace tandem::testing
