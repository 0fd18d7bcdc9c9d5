// AVX2+FMA GEMM driver (f32), the AVX-512 driver's loops with 8-lane registers: for each block of NC
// columns and KC depth, B is packed into 16-column panels; for each block of MC rows, A into 6-row
// panels; then every (A panel, B panel) pair is one micro-kernel call. Threads share the tiles of a
// block (M/N only, never K), so every element sums its products in the same order for any thread
// count. KC is fixed (it decides the order of the sums); MC and NC, which do not, follow this CPU's
// L2 and L3 sizes.
#include "kernels/cpu/gemm_avx2.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>
#include <utility>

#include "kernels/cpu/gemm_avx2_kernels.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/error.h"

namespace tandem::kernels::avx2 {
namespace {

// A KC x kNR B panel is 16 KB (half of Zen 3's 32 KB L1d), a kMR x KC A panel 6 KB: both stay in L1
// for a micro-kernel call, and C is loaded and stored once per 256 products of each element.
constexpr int64_t kKC = 256;
// Below this many flops one thread does the product (a parallel region costs microseconds).
constexpr int64_t kParallelMinFlops = int64_t(1) << 22;

// The A block (MC x KC) fills about half of L2, the B block (KC x NC) about a quarter of L3 (shared
// with other cores) or 4 MB. From sysconf, once; 512 KB / 32 MB (Zen 3) when the CPU does not say.
struct Blocking {
  int64_t mc, nc;
};
const Blocking& blocking() {
  static const Blocking b = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const int64_t l2b = l2 > 0 ? l2 : 512 << 10, l3b = l3 > 0 ? l3 : 32 << 20;
    const int64_t mc = std::clamp<int64_t>(l2b / 2 / (kKC * 4) / kMR * kMR, 4 * kMR, 128 * kMR);
    const int64_t nc = std::clamp<int64_t>(std::min<int64_t>(l3b / 4, 4 << 20) / (kKC * 4) / kNR * kNR, 16 * kNR,
                                           256 * kNR);
    return Blocking{mc, nc};
  }();
  return b;
}

// Grow-only, 64-byte-aligned per-thread buffers (packed panels must not split cache lines).
float* scratch(int slot, int64_t floats) {
  struct Buf {
    void* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  static thread_local Buf bufs[2];
  Buf& b = bufs[slot];
  const size_t bytes = sizeof(float) * static_cast<size_t>(floats);
  if (b.n < bytes) {
    std::free(b.p);
    b.n = (bytes + 63) / 64 * 64;
    b.p = std::aligned_alloc(64, b.n);
    if (!b.p) throw std::bad_alloc();
  }
  return static_cast<float*>(b.p);
}

using KernelFn = void (*)(int64_t, const float*, const float*, int, const TileOut&);
// kKernels[narrow][rows - 1]
using KernelTable = std::array<std::array<KernelFn, kMR>, 2>;
template <int... I>
constexpr KernelTable f32_table(std::integer_sequence<int, I...>) {
  return {{{&kernel_f32<I + 1, false>...}, {&kernel_f32<I + 1, true>...}}};
}
const KernelTable kKernels = f32_table(std::make_integer_sequence<int, kMR>{});

// The np panels of a block: panel q holds rows [q * h, min(q * h + h, rows)) of the operand (element
// (r, p) at x[r * rs + p * ps]), packed [kc][W], at out + q * kc * W. Threads split the panels.
template <int W, class S>
void pack_block(const S* x, int64_t rs, int64_t ps, int64_t rows, int64_t h, int64_t np, int64_t kc, float* out,
                int nt) {
  if (rs == 1 && ps != 1) {  // rows contiguous along the panels: threads split K, each streams whole rows
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && kc >= 4 * kPackRun * nt)
    for (int64_t t = 0; t < nt; ++t)
      pack_rows_runs<W>(x, ps, rows, h, np, kc * t / nt, kc * (t + 1) / nt, out, kc * W);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && np > 1)
  for (int64_t q = 0; q < np; ++q) {
    const int r = static_cast<int>(std::min(h, rows - q * h));
    if (ps == 1)
      pack_panel_k_contiguous<W>(x + q * h * rs, rs, r, kc, out + q * kc * W);
    else if (rs == 1)
      pack_panel_rows_contiguous<W>(x + q * h, ps, r, kc, out + q * kc * W);
    else  // neither stride 1 (a strided view): element by element
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < W; ++i) out[q * kc * W + p * W + i] = i < r ? to_f32(x[(q * h + i) * rs + p * ps]) : 0.f;
  }
}

// The driver over A and B of element type S (f32, or 16-bit widened in the packing), C f32.
template <class S>
void gemm_t(const GemmArgs& g) {
  const int64_t M = g.m, N = g.n, K = g.k;
  const Blocking& bl = blocking();
  const int64_t MC = bl.mc, NC = bl.nc;
  const int64_t kc_max = std::min(K, kKC), nc_max = std::min(N, NC), mc_max = std::min(M, MC);
  const int nt = 2 * M * N * K >= kParallelMinFlops ? omp_get_max_threads() : 1;
  // B transposed ([N, K]: a panel's 16 rows run along K, 16 streams the prefetchers follow), one block
  // of rows (M <= MC) and panels enough for every thread: each B panel is packed just before its
  // tiles, into a per-thread 16 KB buffer that stays in L1, instead of the whole B block first (a
  // write and a re-read of up to NC x KC floats through L2 or memory, used by only M rows here).
  const int64_t npan_max = (nc_max + kNR - 1) / kNR;
  const bool panel_at_a_time = g.trans_b && M <= MC && npan_max >= 2 * nt;
  float* bp = panel_at_a_time ? nullptr : scratch(0, npan_max * kNR * kc_max);
  float* ap = scratch(1, (mc_max + kMR - 1) / kMR * kMR * kc_max);

  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const S* A = static_cast<const S*>(g.a) + bi * g.stride_a;
    const S* B = static_cast<const S*>(g.b) + bi * g.stride_b;
    float* C = static_cast<float*>(g.c) + bi * g.stride_c;
    if (K == 0) {  // C = beta * C
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * g.ldc + j] = g.beta == 0 ? 0.f : static_cast<float>(g.beta) * C[i * g.ldc + j];
      continue;
    }
    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc), npan = (nc + kNR - 1) / kNR;
      for (int64_t pc = 0; pc < K; pc += kKC) {
        const int64_t kc = std::min(kKC, K - pc);
        const int64_t brs = g.trans_b ? g.ldb : 1, bps = g.trans_b ? 1 : g.ldb;
        const S* bsrc = B + jc * brs + pc * bps;
        const int64_t ars = g.trans_a ? 1 : g.lda, aps = g.trans_a ? g.lda : 1;
        TileOut base;
        base.ldc = g.ldc;
        base.alpha = static_cast<float>(g.alpha);
        base.beta = static_cast<float>(g.beta);
        base.first = pc == 0;
        if (panel_at_a_time) {
          const int64_t mpan = (M + kMR - 1) / kMR, h = (M + mpan - 1) / mpan;
          pack_block<kMR>(A + pc * aps, ars, aps, M, h, mpan, kc, ap, nt);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
          for (int64_t jr = 0; jr < npan; ++jr) {
            float* panel = scratch(0, kNR * kc);
            const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - jr * kNR));
            pack_block<kNR>(bsrc + jr * kNR * brs, brs, bps, cols, kNR, 1, kc, panel, 1);
            for (int64_t ir = 0; ir < mpan; ++ir) {
              const int rows = static_cast<int>(std::min(h, M - ir * h));
              TileOut o = base;
              o.c = C + ir * h * g.ldc + jc + jr * kNR;
              kKernels[cols <= 8][rows - 1](kc, ap + ir * kc * kMR, panel, cols, o);
            }
          }
          continue;
        }
        pack_block<kNR>(bsrc, brs, bps, nc, kNR, npan, kc, bp, nt);
        for (int64_t ic = 0; ic < M; ic += MC) {
          const int64_t mc = std::min(MC, M - ic);
          // Rows split evenly over the panels (128 rows: 22 panels of 6 and 5, not 21 x 6 + 2).
          const int64_t mpan = (mc + kMR - 1) / kMR, h = (mc + mpan - 1) / mpan;
          pack_block<kMR>(A + ic * ars + pc * aps, ars, aps, mc, h, mpan, kc, ap, nt);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && npan * mpan > 1)
          for (int64_t t = 0; t < npan * mpan; ++t) {
            const int64_t jr = t / mpan, ir = t % mpan;
            const int64_t row = ir * h, col = jr * kNR;
            const int rows = static_cast<int>(std::min(h, mc - row));
            const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - col));
            TileOut o = base;
            o.c = C + (ic + row) * g.ldc + jc + col;
            kKernels[cols <= 8][rows - 1](kc, ap + ir * kc * kMR, bp + jr * kc * kNR, cols, o);
          }
        }
      }
    }
  }
}

}  // namespace

bool has_f32() { return cpu_isa_usable(CpuIsa::avx2); }

void gemm_f32(const GemmArgs& g) {
  TANDEM_CHECK(has_f32() && g.dtype == DType::f32, "avx2 gemm_f32: unsupported CPU or dtype");
  gemm_t<float>(g);
}

void gemm_widening(const GemmArgs& g) {
  TANDEM_CHECK(has_f32() && is_low_precision(g.dtype), "avx2 gemm_widening: unsupported CPU or dtype {}",
               dtype_name(g.dtype));
  if (g.dtype == DType::f16)
    gemm_t<F16>(g);
  else
    gemm_t<BF16>(g);
}

}  // namespace tandem::kernels::avx2
