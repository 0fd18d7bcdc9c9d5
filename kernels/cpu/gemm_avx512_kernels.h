// Packing and register-tile micro-kernels of the AVX-512 GEMM (gemm_avx512.cpp drives them). Every
// function carrying intrinsics is compiled for AVX-512 by a target attribute and has internal
// linkage, so nothing here runs (or is merged into other code) on a CPU that lacks it.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/backend/common/half.h"

#define TANDEM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define TANDEM_AVX512_INLINE TANDEM_AVX512 inline __attribute__((always_inline))

namespace tandem::kernels::avx512 {
namespace {

// Register tile: kMR rows x kNR columns = 14 x 2 zmm accumulators (28 of the 32 registers).
constexpr int kMR = 14, kNR = 32;

// Where a tile's sums go. f32 output: the first K block stores alpha*acc + beta*C, later blocks add
// alpha*acc. bf16 output: partial sums stay in the f32 workspace w until the last K block, which
// rounds alpha*sum + beta*C once.
struct TileOut {
  float* c32 = nullptr;
  uint16_t* c16 = nullptr;
  int64_t ldc = 0;
  float* w = nullptr;
  int64_t ldw = 0;
  float alpha = 1, beta = 0;
  bool first = true, last = true;
};

TANDEM_AVX512_INLINE __mmask16 low_mask16(int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

TANDEM_AVX512_INLINE __m512 load_bf16(__mmask16 m, const uint16_t* p) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Round to nearest even as float_to_bf16_bits does (NaN stays NaN, denormals kept).
TANDEM_AVX512_INLINE void store_bf16(uint16_t* p, __mmask16 m, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

TANDEM_AVX512_INLINE void store_half_row(__m512 acc, __mmask16 m, const TileOut& o, int64_t off_c, int64_t off_w) {
  if (o.c32) {
    float* c = o.c32 + off_c;
    __m512 v = _mm512_mul_ps(_mm512_set1_ps(o.alpha), acc);
    if (!o.first)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c));
    else if (o.beta != 0)
      v = _mm512_fmadd_ps(_mm512_set1_ps(o.beta), _mm512_maskz_loadu_ps(m, c), v);
    _mm512_mask_storeu_ps(c, m, v);
    return;
  }
  float* w = o.w + off_w;
  if (!o.first) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, w));
  if (!o.last) {
    _mm512_mask_storeu_ps(w, m, acc);
    return;
  }
  uint16_t* c = o.c16 + off_c;
  __m512 v = _mm512_mul_ps(_mm512_set1_ps(o.alpha), acc);
  if (o.beta != 0) v = _mm512_fmadd_ps(_mm512_set1_ps(o.beta), load_bf16(m, c), v);
  store_bf16(c, m, v);
}

template <int MR>
TANDEM_AVX512_INLINE void store_tile(const __m512* c0, const __m512* c1, int n, const TileOut& o) {
  const __mmask16 m0 = low_mask16(n), m1 = low_mask16(n - 16);
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    store_half_row(c0[i], m0, o, i * o.ldc, i * o.ldw);
    if (m1) store_half_row(c1[i], m1, o, i * o.ldc + 16, i * o.ldw + 16);
  }
}

// f32: a is a packed A panel [kc][kMR] (first MR rows used), b a packed B panel [kc][kNR]. NARROW:
// the panel's last 16 columns are all padding (n <= 16), so only the first zmm column is computed.
template <int MR, bool NARROW>
TANDEM_AVX512 void kernel_f32(int64_t kc, const float* a, const float* b, int n, const TileOut& o) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b), b1 = NARROW ? b0 : _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      if (!NARROW) c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += kMR;
    b += kNR;
  }
  store_tile<MR>(c0, c1, n, o);
}

// bf16: panels of bf16 pairs along K, a [kcg][kMR][2] and b [kcg][kNR][2]; each vdpbf16ps adds
// a[i][2p] * b[2p][j] + a[i][2p+1] * b[2p+1][j] to lane j. NARROW as for f32.
template <int MR, bool NARROW>
TANDEM_AVX512 void kernel_bf16(int64_t kcg, const uint16_t* a, const uint16_t* b, int n, const TileOut& o) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kcg; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = NARROW ? b0 : (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      uint32_t pair;
      std::memcpy(&pair, a + 2 * i, sizeof(pair));
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);
      if (!NARROW) c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);
    }
    a += 2 * kMR;
    b += 2 * kNR;
  }
  store_tile<MR>(c0, c1, n, o);
}

// 16x16 transpose of 32-bit elements: r[i] lane j -> r[j] lane i.
TANDEM_AVX512_INLINE void transpose16(__m512* r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), w = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE), w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_f32x4(v, w, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(v, w, 0xDD);
    r[8 + j] = _mm512_shuffle_f32x4(v2, w2, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v2, w2, 0xDD);
  }
}

// One 16 x 16 block of 32-bit units through registers: unit q of row i, at src + i * rs_bytes + 4 * q
// for i < rows and q < units (the rest read as zero), goes to out[q * ld_out + i]. Each of the
// `units` rows of out gets its first `lanes` lanes (zeros past `rows`), nothing else.
TANDEM_AVX512_INLINE void transpose_block16(const char* src, int64_t rs_bytes, int rows, int units, void* out,
                                            int64_t ld_out, int lanes) {
  const __mmask16 load_mask = low_mask16(units), store_mask = low_mask16(lanes);
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = i < rows ? _mm512_maskz_loadu_ps(load_mask, src + i * rs_bytes) : _mm512_setzero_ps();
  transpose16(v);
  float* o = static_cast<float*>(out);
  for (int q = 0; q < units; ++q) _mm512_mask_storeu_ps(o + q * ld_out, store_mask, v[q]);
}

// Packs 32-bit units (an f32, or a pair of bf16 along K) of a panel whose source rows are contiguous
// along K: unit (r, q) at src + r * rs_bytes + 4 * q, r < rows, q < nq; out[q * W + r], rows >= rows
// zero. W is kNR or kMR.
template <int W>
TANDEM_AVX512 void pack_transpose32(const char* src, int64_t rs_bytes, int rows, int64_t nq, uint32_t* out) {
  for (int64_t q0 = 0; q0 < nq; q0 += 16) {
    const int nqb = static_cast<int>(nq - q0 < 16 ? nq - q0 : 16);
    for (int r0 = 0; r0 < W; r0 += 16)
      transpose_block16(src + r0 * rs_bytes + 4 * q0, rs_bytes, rows - r0, nqb, out + q0 * W + r0, W, W - r0);
  }
}

// Panels whose source is contiguous along their rows (a transposed operand): unit p of source row r
// at src[p * ps + r]. Panel q holds rows [q * h, q * h + h) of `rows` and is stored at out + q * pstride.
// Units [p0, p1) of every panel are packed in runs of kPackRun units, runs outermost, so each source
// row is read once across all panels while it is in L1 (panel by panel, the reads would stride by ps,
// often 4 KB, through the same few L1 sets), and each panel takes a run's units as one contiguous
// write (unit by unit, every panel's write lands in the same L1 set: the panels are a multiple of
// 4 KB apart). Runs of 8 against 1, one thread on the Zen 4: the weight-gradient GEMMs 1.6-2.8%
// faster (f32 and bf16); 16 the same as 8, 32 slower.
constexpr int64_t kPackRun = 8;

// n values of a source row as f32 (lanes >= n zero): f32 as stored, f16 widened by vcvtph2ps (exact;
// a signalling NaN comes back quiet, which a product makes a NaN anyway).
TANDEM_AVX512_INLINE __m512 row_f32(const float* src, int n) { return _mm512_maskz_loadu_ps(low_mask16(n), src); }
TANDEM_AVX512_INLINE __m512 row_f32(const half* src, int n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(low_mask16(n), src));
}

template <int W, class Src>
TANDEM_AVX512 void pack_rows_f32(const Src* src, int64_t ps, int64_t rows, int64_t h, int64_t np, int64_t p0,
                                 int64_t p1, float* out, int64_t pstride) {
  for (int64_t run = p0; run < p1; run += kPackRun) {
    const int64_t run_end = run + kPackRun < p1 ? run + kPackRun : p1;
    for (int64_t q = 0; q < np; ++q) {
      const int r = static_cast<int>(rows - q * h < h ? rows - q * h : h);
      for (int64_t p = run; p < run_end; ++p) {
        const Src* s = src + p * ps + q * h;
        float* o = out + q * pstride + p * W;
        _mm512_mask_storeu_ps(o, low_mask16(W), row_f32(s, r));
        if (W > 16) _mm512_mask_storeu_ps(o + 16, low_mask16(W - 16), row_f32(s + 16, r - 16));
      }
    }
  }
}

// 32 bf16 of a source row (bf16, or f32 rounded to bf16) with lanes >= rows zero.
TANDEM_AVX512_INLINE __m512i row_bf16(const uint16_t* src, int rows) {
  const __mmask32 m = rows >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << rows) - 1);
  return _mm512_maskz_loadu_epi16(m, src);
}
TANDEM_AVX512_INLINE __m512i row_bf16(const float* src, int rows) {
  const __m512 lo = _mm512_maskz_loadu_ps(low_mask16(rows), src);
  const __m512 hi = _mm512_maskz_loadu_ps(low_mask16(rows - 16), src + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// Two source rows of 32 bf16, K index 2g (r0) and 2g + 1 (r1), interleaved into pairs: lo holds the
// pairs of lanes 0-15, hi those of lanes 16-31 (the packed layouts' [lane][2]).
TANDEM_AVX512_INLINE void interleave_pairs(__m512i r0, __m512i r1, __m512i& lo, __m512i& hi) {
  alignas(64) static constexpr uint16_t kLo[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                   8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i lo_idx = _mm512_load_si512(kLo);
  lo = _mm512_permutex2var_epi16(r0, lo_idx, r1);
  hi = _mm512_permutex2var_epi16(r0, _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16)), r1);
}

// An element's bf16 bits: bf16 as stored, f32 rounded to nearest even.
inline uint16_t bf16_bits(uint16_t v) { return v; }
inline uint16_t bf16_bits(bfloat16 v) { return v.bits; }
inline uint16_t bf16_bits(float v) { return float_to_bf16_bits(v); }

// f32 rows contiguous along K (row r at x + r * rs, kc values) rounded to bf16 into tmp + r * ld (ld a
// multiple of 32), zero-padded: the pairs along K are then 32-bit units for pack_transpose32.
TANDEM_AVX512 inline void rows_to_bf16(const float* x, int64_t rs, int rows, int64_t kc, uint16_t* tmp, int64_t ld) {
  for (int r = 0; r < rows; ++r)
    for (int64_t p = 0; p < kc; p += 32) {
      const int left = static_cast<int>(kc - p < 32 ? kc - p : 32);
      _mm512_storeu_si512(tmp + r * ld + p, row_bf16(x + r * rs + p, left));
    }
}

// f16 rows contiguous along K (row r at x + r * rs, kc values) widened into tmp + r * ld (ld a multiple
// of 16), zero-padded: f32 units for pack_transpose32.
TANDEM_AVX512 inline void rows_to_f32(const half* x, int64_t rs, int rows, int64_t kc, float* tmp, int64_t ld) {
  for (int r = 0; r < rows; ++r)
    for (int64_t p = 0; p < kc; p += 16) {
      const int left = static_cast<int>(kc - p < 16 ? kc - p : 16);
      _mm512_storeu_ps(tmp + r * ld + p, row_f32(x + r * rs + p, left));
    }
}

// bf16 panels as pack_rows_f32 (pair groups [g0, g1) of every panel, in runs of kPackRun / 2 groups):
// out[(g * W + r) * 2 + e] of panel q = element (q * h + r, 2g + e); an odd kc's last pair is padded
// with zero.
template <int W, class Src>
TANDEM_AVX512 void pack_rows_bf16(const Src* src, int64_t ps, int64_t rows, int64_t h, int64_t np, int64_t kc,
                                  int64_t g0, int64_t g1, uint16_t* out, int64_t pstride) {
  for (int64_t run = g0; run < g1; run += kPackRun / 2) {
    const int64_t run_end = run + kPackRun / 2 < g1 ? run + kPackRun / 2 : g1;
    for (int64_t q = 0; q < np; ++q) {
      const int r = static_cast<int>(rows - q * h < h ? rows - q * h : h);
      for (int64_t g = run; g < run_end; ++g) {
        const Src* s = src + 2 * g * ps + q * h;
        const __m512i r0 = row_bf16(s, r);
        const __m512i r1 = 2 * g + 1 < kc ? row_bf16(s + ps, r) : _mm512_setzero_si512();
        __m512i lo, hi;
        interleave_pairs(r0, r1, lo, hi);
        uint16_t* o = out + q * pstride + g * W * 2;
        _mm512_mask_storeu_epi16(o, W >= 16 ? __mmask32(0xffffffffu) : __mmask32((1u << (2 * W)) - 1), lo);
        if (W > 16) _mm512_storeu_si512(o + 32, hi);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::avx512
