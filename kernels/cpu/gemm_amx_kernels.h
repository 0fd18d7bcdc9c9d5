// The AMX micro-kernel of the CPU GEMM and the packing of its A panels (gemm_avx512.cpp drives them;
// its B panels are the AVX-512 bf16 kernel's). Functions carrying AMX intrinsics are compiled for AMX
// by a target attribute and have internal linkage: they run only after has_amx() (cpuid, and Linux's
// permission to use the tile registers) said yes.
#pragma once
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/gemm_avx512_kernels.h"

namespace tandem::kernels::avx512 {
namespace {

// A tile product multiplies 16 rows by 16 pairs along K (32 bf16 = 64 bytes a row) by 16 pairs x 16
// columns, adding into 16 x 16 f32 sums. One kernel call makes a 32 x 32 block of C: C in tmm0..3
// ([rows 0-15 | 16-31] x [columns 0-15 | 16-31]), A in tmm4..5, B in tmm6..7. A panel: kAmxMR rows
// as [steps][32 rows][32 K]; B panel: the bf16 kernel's [pairs][32 columns][2], its pairs padded to
// whole steps of kAmxStepPairs.
constexpr int kAmxMR = 32, kAmxStepPairs = 16;
constexpr int64_t kAmxAStep = kAmxMR * 2 * kAmxStepPairs;  // uint16 of an A panel per step (2 KB)
constexpr int64_t kAmxBStep = kAmxStepPairs * 2 * kNR;     // uint16 of a B panel per step (2 KB)

// C block [rows, n] (rows, n <= 32) of a packed A panel times a packed B panel, over `steps` steps of
// 32 K, between amx_begin() and amx_end() on the calling thread. TALL: rows > 16 (else the lower
// tiles are skipped); WIDE: n > 16. tdpbf16ps takes denormal inputs as zero as vdpbf16ps does, but
// adds a pair's two products together before adding them to the sum (docs/cpu-kernels.md: the last
// bits differ); the sums then take the bf16 kernel's way out (store_half_row: alpha, beta, K blocks,
// bf16 rounding).
template <bool TALL, bool WIDE>
TANDEM_AMX void kernel_amx(int64_t steps, const uint16_t* a, const uint16_t* b, int rows, int n, const TileOut& o) {
  _tile_zero(0);
  if (WIDE) _tile_zero(1);
  if (TALL) _tile_zero(2);
  if (TALL && WIDE) _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s, a += kAmxAStep, b += kAmxBStep) {
    _tile_loadd(4, a, 64);
    if (TALL) _tile_loadd(5, a + 16 * 32, 64);
    _tile_loadd(6, b, 4 * kNR);
    if (WIDE) _tile_loadd(7, b + 32, 4 * kNR);
    _tile_dpbf16ps(0, 4, 6);
    if (WIDE) _tile_dpbf16ps(1, 4, 7);
    if (TALL) _tile_dpbf16ps(2, 5, 6);
    if (TALL && WIDE) _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float acc[kAmxMR][32];
  _tile_stored(0, &acc[0][0], sizeof acc[0]);
  if (WIDE) _tile_stored(1, &acc[0][16], sizeof acc[0]);
  if (TALL) _tile_stored(2, &acc[16][0], sizeof acc[0]);
  if (TALL && WIDE) _tile_stored(3, &acc[16][16], sizeof acc[0]);
  const __mmask16 m0 = low_mask16(n), m1 = low_mask16(n - 16);
  for (int i = 0; i < rows; ++i) {
    store_half_row(_mm512_load_ps(acc[i]), m0, o, i * o.ldc, i * o.ldw);
    if (WIDE) store_half_row(_mm512_load_ps(acc[i] + 16), m1, o, i * o.ldc + 16, i * o.ldw + 16);
  }
}

// One A panel for kernel_amx: rows [0, rows) of the operand (element (r, p) at x[r * rs + p * ps],
// rows <= 32; Src uint16_t for bf16 bits, or float) as [steps][32 rows][32 K] bf16 (f32 rounded to nearest even), zero beyond rows and kc.
// K contiguous (ps == 1): 32 values a row are one (or two) loads; rows contiguous (rs == 1, a
// transposed operand): two source rows interleaved into pairs (as pack_rows_bf16), then 16 x 16
// transposes of the pairs.
template <class Src>
TANDEM_AMX void pack_a_amx(const Src* x, int64_t rs, int64_t ps, int rows, int64_t kc, int64_t steps,
                           uint16_t* out) {
  const __m512i zero = _mm512_setzero_si512();
  if (ps == 1) {
    for (int64_t s = 0; s < steps; ++s)
      for (int r = 0; r < kAmxMR; ++r) {
        const int64_t p = s * 32;
        const int left = static_cast<int>(kc - p < 32 ? kc - p : 32);
        _mm512_store_si512(out + s * kAmxAStep + r * 32, r < rows && left > 0 ? row_bf16(x + r * rs + p, left) : zero);
      }
    return;
  }
  if (rs == 1) {
    for (int64_t s = 0; s < steps; ++s) {
      __m512 lo[16], hi[16];  // pair j of the step: rows 0-15, rows 16-31
      for (int j = 0; j < 16; ++j) {
        const int64_t p = 2 * (s * kAmxStepPairs + j);
        const __m512i r0 = p < kc ? row_bf16(x + p * ps, rows) : zero;
        const __m512i r1 = p + 1 < kc ? row_bf16(x + (p + 1) * ps, rows) : zero;
        __m512i l, h;
        interleave_pairs(r0, r1, l, h);
        lo[j] = _mm512_castsi512_ps(l);
        hi[j] = _mm512_castsi512_ps(h);
      }
      transpose16(lo);
      transpose16(hi);
      for (int r = 0; r < 16; ++r) {
        _mm512_store_si512(out + s * kAmxAStep + r * 32, _mm512_castps_si512(lo[r]));
        _mm512_store_si512(out + s * kAmxAStep + (16 + r) * 32, _mm512_castps_si512(hi[r]));
      }
    }
    return;
  }
  for (int64_t s = 0; s < steps; ++s)
    for (int r = 0; r < kAmxMR; ++r)
      for (int j = 0; j < 32; ++j) {
        const int64_t p = s * 32 + j;
        out[s * kAmxAStep + r * 32 + j] = r < rows && p < kc ? bf16_bits(x[r * rs + p * ps]) : uint16_t(0);
      }
}

}  // namespace
}  // namespace tandem::kernels::avx512
