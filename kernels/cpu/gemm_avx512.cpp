// AVX-512 GEMM driver: for each block of NC columns and KC depth, B is packed into 32-column panels;
// for each block of MC rows, A into 14-row panels (32-row panels for AMX tiles); then every (A panel,
// B panel) pair is one micro-kernel call. Threads share the tiles of a block (M/N only, never K), so
// every element sums its products in the same order for any thread count.
#include "kernels/cpu/gemm_avx512.h"

#include <sys/syscall.h>
#include <unistd.h>
#include <cpuid.h>

// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsics once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/gemm_amx_kernels.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/error.h"

namespace tandem::kernels::avx512 {
namespace {

// K blocks are long: a C tile is loaded and stored once per K block, and the packed panels stream
// from L2 at a pace the prefetchers keep up with (a KC x kNR f32 B panel is 128 KB, reused by the 12
// A panels of an MC x KC A block of 688 KB; the KC x NC B block of 4 MB stays in L3). Measured on an
// AMD EPYC (Zen 4), f32, one thread, KC 256 -> 1024 (interleaved runs): [1024 x 2304] over K = 768
// 97.7 -> 109.2 GFLOP/s, [768 x 3072] over K = 1024 (A transposed) 98.5 -> 106.5, [1024 x 256] over
// K = 1024 105.2 -> 107.4 (bf16 +5-7% on the first two); KC 2048 no better; a small GPT's training
// step 2% faster.
constexpr int64_t kKC = 1024, kMC = 12 * kMR, kNC = 1024;
// AMX: the tiles' products are ~10x faster, so K blocks are longer (fewer passes over C and fewer
// re-packings of A): a 32-row A panel and a 32-column B panel of KC = 1024 are 64 KB each (L2).
// Measured on bf16 GEMMs of the GPT's shapes (one thread, best of 200 interleaved runs): K = 1024 at
// KC 256 / 512 / 1024: 664 / 710 / 924 GFLOP/s; K = 3072: 804 at 512, 904 at 1024, 883 at 2048.
constexpr int64_t kAmxKC = 1024, kAmxMC = 8 * kAmxMR;
// Below this many flops one thread does the product (a parallel region costs microseconds).
constexpr int64_t kParallelMinFlops = int64_t(1) << 22;

// Grow-only, 64-byte-aligned per-thread buffers (packed panels must not split cache lines).
void* scratch(int slot, size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  static thread_local Buf bufs[4];
  Buf& b = bufs[slot];
  if (b.n < bytes) {
    std::free(b.p);
    b.n = (bytes + 63) / 64 * 64;
    b.p = std::aligned_alloc(64, b.n);
    if (!b.p) throw std::bad_alloc();
  }
  return b.p;
}

template <class Pk>
using KernelFn = void (*)(int64_t, const Pk*, const Pk*, int, const TileOut&);

// kernels[narrow][rows - 1]
template <class Pk>
using KernelTable = std::array<std::array<KernelFn<Pk>, kMR>, 2>;
template <int... I>
constexpr KernelTable<float> f32_table(std::integer_sequence<int, I...>) {
  return {{{&kernel_f32<I + 1, false>...}, {&kernel_f32<I + 1, true>...}}};
}
template <int... I>
constexpr KernelTable<uint16_t> bf16_table(std::integer_sequence<int, I...>) {
  return {{{&kernel_bf16<I + 1, false>...}, {&kernel_bf16<I + 1, true>...}}};
}
const auto kF32Kernels = f32_table(std::make_integer_sequence<int, kMR>{});
const auto kBf16Kernels = bf16_table(std::make_integer_sequence<int, kMR>{});

// One panel of W rows (element (r, p) of the operand at x[r * rs + p * ps], r < rows, p < kc, rs != 1:
// pack_block packs transposed operands) in the packed layout [kcg][W][KG]; missing rows and the odd-K
// tail are zero.
template <int W, class Pk, class Src>
void pack_panel(const Src* x, int64_t rs, int64_t ps, int rows, int64_t kc, Pk* out) {
  if constexpr (std::is_same_v<Pk, float>) {
    static_assert(std::is_same_v<Src, float> || std::is_same_v<Src, half>, "f32 panels of f32 or f16 values");
    if (ps == 1 && std::is_same_v<Src, float>) {
      pack_transpose32<W>(reinterpret_cast<const char*>(x), rs * 4, rows, kc, reinterpret_cast<uint32_t*>(out));
    } else if (ps == 1) {  // f16 rows widened first (into L1), then the f32 transpose
      if constexpr (std::is_same_v<Src, half>) {
        const int64_t ld = (kc + 15) / 16 * 16;
        auto* tmp = static_cast<float*>(scratch(3, sizeof(float) * static_cast<size_t>(W * ld)));
        rows_to_f32(x, rs, rows, kc, tmp, ld);
        pack_transpose32<W>(reinterpret_cast<const char*>(tmp), ld * 4, rows, kc, reinterpret_cast<uint32_t*>(out));
      }
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int r = 0; r < W; ++r) out[p * W + r] = r < rows ? static_cast<float>(x[r * rs + p * ps]) : 0.f;
    }
  } else {
    const int64_t kcg = (kc + 1) / 2;
    int64_t g0 = 0;
    if (ps == 1) {  // bf16 pairs adjacent in memory (after rounding, for f32): a transpose of 32-bit units
      if constexpr (std::is_same_v<Src, float>) {
        const int64_t ld = (kc + 31) / 32 * 32;
        auto* tmp = static_cast<uint16_t*>(scratch(3, sizeof(uint16_t) * static_cast<size_t>(W * ld)));
        rows_to_bf16(x, rs, rows, kc, tmp, ld);
        g0 = kcg;
        pack_transpose32<W>(reinterpret_cast<const char*>(tmp), ld * 2, rows, g0, reinterpret_cast<uint32_t*>(out));
      } else {
        g0 = kc / 2;
        pack_transpose32<W>(reinterpret_cast<const char*>(x), rs * 2, rows, g0, reinterpret_cast<uint32_t*>(out));
      }
    }
    for (int64_t g = g0; g < kcg; ++g)
      for (int r = 0; r < W; ++r)
        for (int e = 0; e < 2; ++e) {
          const int64_t p = 2 * g + e;
          out[(g * W + r) * 2 + e] = r < rows && p < kc ? bf16_bits(x[r * rs + p * ps]) : uint16_t(0);
        }
  }
}

// The np panels of a block: panel q holds rows [q * h, min(q * h + h, rows)) of the operand (element
// (r, p) at x[r * rs + p * ps]) and starts at out + q * (packed panel size). Rows contiguous in memory
// (rs == 1, a transposed operand): threads split K and each streams whole source rows across all panels;
// otherwise threads split the panels.
// Each panel holds kcg_pad >= ceil(kc / KG) groups; those past kc are zero (AMX steps of 16 pairs).
template <int W, class Pk, class Src>
void pack_block(const Src* x, int64_t rs, int64_t ps, int64_t rows, int64_t h, int64_t np, int64_t kc,
                int64_t kcg_pad, Pk* out, int nt) {
  constexpr int KG = std::is_same_v<Pk, float> ? 1 : 2;
  const int64_t kcg = (kc + KG - 1) / KG, pstride = kcg_pad * KG * W;
  if (kcg_pad > kcg)
    for (int64_t q = 0; q < np; ++q)
      std::memset(out + q * pstride + kcg * KG * W, 0, sizeof(Pk) * static_cast<size_t>((kcg_pad - kcg) * KG * W));
  if (rs == 1) {
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && kcg >= 2 * nt)
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t lo = kcg * t / nt, hi = kcg * (t + 1) / nt;
      if constexpr (std::is_same_v<Pk, float>)
        pack_rows_f32<W>(x, ps, rows, h, np, lo, hi, out, pstride);
      else if constexpr (std::is_same_v<Src, float>)
        pack_rows_bf16<W>(x, ps, rows, h, np, kc, lo, hi, out, pstride);
      else
        pack_rows_bf16<W>(reinterpret_cast<const uint16_t*>(x), ps, rows, h, np, kc, lo, hi, out, pstride);
    }
    return;
  }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && np > 1)
  for (int64_t q = 0; q < np; ++q)
    pack_panel<W>(x + q * h * rs, rs, ps, static_cast<int>(std::min(h, rows - q * h)), kc, out + q * pstride);
}

// C stores bf16 (not f32: dtype f32, or bf16 operands with wide_c).
bool c_is_bf16(const GemmArgs& g) { return g.dtype == DType::bf16 && !g.wide_c; }

// C = beta * C when K is empty.
void scale_c(const GemmArgs& g, void* c) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      if (!c_is_bf16(g)) {
        float& v = static_cast<float*>(c)[i * g.ldc + j];
        v = g.beta == 0 ? 0.f : static_cast<float>(g.beta) * v;
      } else {
        uint16_t& v = static_cast<uint16_t*>(c)[i * g.ldc + j];
        v = g.beta == 0 ? 0 : float_to_bf16_bits(static_cast<float>(g.beta) * bf16_bits_to_float(v));
      }
    }
}

using AmxKernelFn = void (*)(int64_t, const uint16_t*, const uint16_t*, int, int, const TileOut&);
// kAmxKernels[tall][wide]
const AmxKernelFn kAmxKernels[2][2] = {{&kernel_amx<false, false>, &kernel_amx<false, true>},
                                       {&kernel_amx<true, false>, &kernel_amx<true, true>}};

// The driver for the f32 kernel (Pk float), the bf16 one (Pk uint16_t) and, with AMX, the tile kernel
// (bf16 panels too; A in its own row layout, K padded to whole tile steps).
template <class Pk, class Src, bool AMX = false>
void run(const GemmArgs& g, const KernelTable<Pk>* kernels) {
  constexpr int KG = std::is_same_v<Pk, float> ? 1 : 2;
  constexpr int MR = AMX ? kAmxMR : kMR;
  constexpr int64_t KC = AMX ? kAmxKC : kKC, MC = AMX ? kAmxMC : kMC, KPAD = AMX ? kAmxStepPairs : 1;
  auto pad = [](int64_t kcg) { return (kcg + KPAD - 1) / KPAD * KPAD; };
  const int64_t M = g.m, N = g.n, K = g.k;
  const int64_t kc_max = std::min(K, KC), kcg_max = pad((kc_max + KG - 1) / KG);
  const int64_t nc_max = std::min(N, kNC), mc_max = std::min(M, MC);
  Pk* bp = static_cast<Pk*>(scratch(0, sizeof(Pk) * static_cast<size_t>((nc_max + kNR - 1) / kNR * kNR * kcg_max * KG)));
  Pk* ap = static_cast<Pk*>(scratch(1, sizeof(Pk) * static_cast<size_t>((mc_max + MR - 1) / MR * MR * kcg_max * KG)));
  const bool out16 = c_is_bf16(g);
  float* w = out16 && K > KC ? static_cast<float*>(scratch(2, sizeof(float) * static_cast<size_t>(M * nc_max)))
                             : nullptr;
  const int nt = 2 * M * N * K >= kParallelMinFlops ? omp_get_max_threads() : 1;
  const size_t esize = out16 ? 2 : 4;

  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const Src* A = static_cast<const Src*>(g.a) + bi * g.stride_a;
    const Src* B = static_cast<const Src*>(g.b) + bi * g.stride_b;
    char* C = static_cast<char*>(g.c) + static_cast<size_t>(bi * g.stride_c) * esize;
    if (K == 0) {
      scale_c(g, C);
      continue;
    }
    for (int64_t jc = 0; jc < N; jc += kNC) {
      const int64_t nc = std::min(kNC, N - jc), npan = (nc + kNR - 1) / kNR;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc), kcg = pad((kc + KG - 1) / KG);
        const int64_t brs = g.trans_b ? g.ldb : 1, bps = g.trans_b ? 1 : g.ldb;
        const Src* bsrc = B + jc * brs + pc * bps;
        pack_block<kNR>(bsrc, brs, bps, nc, kNR, npan, kc, kcg, bp, nt);
        for (int64_t ic = 0; ic < M; ic += MC) {
          const int64_t mc = std::min(MC, M - ic);
          // Rows split evenly over the panels (128 rows: 10 panels of 13 and 11, not 9 x 14 + 2).
          const int64_t mpan = (mc + MR - 1) / MR, h = (mc + mpan - 1) / mpan;
          const int64_t ars = g.trans_a ? 1 : g.lda, aps = g.trans_a ? g.lda : 1;
          const Src* asrc = A + ic * ars + pc * aps;
          if constexpr (AMX) {
            using Bits = std::conditional_t<std::is_same_v<Src, float>, float, uint16_t>;
            const Bits* abits = reinterpret_cast<const Bits*>(asrc);
            const int64_t steps = kcg / kAmxStepPairs;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && mpan > 1)
            for (int64_t q = 0; q < mpan; ++q)
              pack_a_amx(abits + q * h * ars, ars, aps, static_cast<int>(std::min(h, mc - q * h)), kc, steps,
                         ap + q * steps * kAmxAStep);
          } else {
            pack_block<kMR>(asrc, ars, aps, mc, h, mpan, kc, kcg, ap, nt);
          }
          TileOut base;
          base.ldc = g.ldc;
          base.ldw = nc_max;
          base.alpha = static_cast<float>(g.alpha);
          base.beta = static_cast<float>(g.beta);
          base.first = pc == 0;
          base.last = pc + kc == K;
#pragma omp parallel num_threads(nt) if (nt > 1 && npan * mpan > 1)
          {
            if constexpr (AMX) amx_begin();
#pragma omp for schedule(static)
            for (int64_t t = 0; t < npan * mpan; ++t) {
              const int64_t jr = t / mpan, ir = t % mpan;
              const int64_t row = ir * h, col = jr * kNR;
              const int rows = static_cast<int>(std::min(h, mc - row));
              TileOut o = base;
              const int64_t coff = (ic + row) * g.ldc + jc + col;
              if (out16) {
                o.c16 = reinterpret_cast<uint16_t*>(C) + coff;
                o.w = w ? w + (ic + row) * nc_max + col : nullptr;
              } else {
                o.c32 = reinterpret_cast<float*>(C) + coff;
              }
              const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - col));
              const Pk* bpan = bp + jr * kcg * KG * kNR;
              if constexpr (AMX)
                kAmxKernels[rows > 16][cols > 16](kcg / kAmxStepPairs, ap + ir * kcg * KG * MR, bpan, rows, cols, o);
              else
                (*kernels)[cols <= 16][rows - 1](kcg, ap + ir * kcg * KG * MR, bpan, cols, o);
            }
            if constexpr (AMX) amx_end();
          }
        }
      }
    }
  }
}

}  // namespace

bool has_f32() { return cpu_isa_usable(CpuIsa::avx512); }

bool has_bf16() {
  static const bool ok = has_f32() && __builtin_cpu_supports("avx512bf16");
  return ok;
}

// cpuid leaf 7 (EDX: AMX-BF16 bit 22, AMX-TILE bit 24; read directly, as clang 14's
// __builtin_cpu_supports does not know them), then Linux's permission for the tile data state (the
// kernel enables it per process, on request: arch_prctl ARCH_REQ_XCOMP_PERM, feature 18).
bool has_amx() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!has_bf16() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

void gemm_f32(const GemmArgs& g) {
  TANDEM_CHECK(has_f32() && g.dtype == DType::f32, "avx512 gemm_f32: unsupported CPU or dtype");
  run<float, float>(g, &kF32Kernels);
}

void gemm_f16_wide(const GemmArgs& g) {
  TANDEM_CHECK(has_f32() && g.dtype == DType::f16 && g.wide_c, "avx512 gemm_f16_wide: unsupported CPU or operands");
  run<float, half>(g, &kF32Kernels);
}

void gemm_bf16(const GemmArgs& g) {
  TANDEM_CHECK(has_bf16() && (g.dtype == DType::bf16 || g.dtype == DType::f32),
               "avx512 gemm_bf16: unsupported CPU or dtype");
  if (g.dtype == DType::bf16)
    run<uint16_t, bfloat16>(g, &kBf16Kernels);
  else
    run<uint16_t, float>(g, &kBf16Kernels);
}

void gemm_bf16_amx(const GemmArgs& g) {
  TANDEM_CHECK(has_amx() && (g.dtype == DType::bf16 || g.dtype == DType::f32),
               "avx512 gemm_bf16_amx: unsupported CPU or dtype");
  if (g.dtype == DType::bf16)
    run<uint16_t, bfloat16, true>(g, nullptr);
  else
    run<uint16_t, float, true>(g, nullptr);
}

}  // namespace tandem::kernels::avx512
