// Max pooling of one [h, w] plane, forward and backward: the CPU max_pool2d kernels run it per
// (image, channel) plane, and batch norm's fused epilogue (kernels/cpu/batch_norm.cpp) runs it on each
// plane it has just normalised, while the plane is still in cache.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/backend/cpu_isa.h"
#include "runtime/backend/pool.h"
#include "runtime/dtype.h"

#include <immintrin.h>

namespace tandem::kernels::cpu_pool {

// One step of a NaN-aware max: takes v when it is larger or NaN (a NaN in the window propagates).
template <class A>
inline void max_step(A v, int32_t i, A& best, int32_t& best_i) {
  const bool take = (v > best) | (v != v);
  best = take ? v : best;
  best_i = take ? i : best_i;
}

#if defined(__AVX512F__)
// The cnn's 2x2 / stride 2 max pool on f32, 16 outputs per step with masked loads for the row tail
// (rows of 14 or 7 outputs are too short for the compiler's vector loop and its scalar tail, whose
// NaN-aware selects become unpredictable branches). Same results as max_step.
inline void max_pool_2x2_row_avx512(const float* r0, const float* r1, float* out, int32_t* idx, int wo, int base,
                                    int w) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int ox = 0; ox < wo; ox += 16) {
    const int rem = wo - ox < 16 ? wo - ox : 16;                // outputs in this step
    const int in_n = 2 * rem;                                    // inputs per row
    const __mmask16 m_lo = static_cast<__mmask16>(in_n >= 16 ? 0xFFFF : (1u << in_n) - 1);
    const __mmask16 m_hi = static_cast<__mmask16>(in_n <= 16 ? 0 : (in_n >= 32 ? 0xFFFF : (1u << (in_n - 16)) - 1));
    const __mmask16 m_out = static_cast<__mmask16>(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
    const float* p0 = r0 + 2 * ox;
    const float* p1 = r1 + 2 * ox;
    const __m512 a_lo = _mm512_maskz_loadu_ps(m_lo, p0), a_hi = _mm512_maskz_loadu_ps(m_hi, p0 + 16);
    const __m512 c_lo = _mm512_maskz_loadu_ps(m_lo, p1), c_hi = _mm512_maskz_loadu_ps(m_hi, p1 + 16);
    const __m512 a = _mm512_permutex2var_ps(a_lo, even, a_hi), b = _mm512_permutex2var_ps(a_lo, odd, a_hi);
    const __m512 c = _mm512_permutex2var_ps(c_lo, even, c_hi), d = _mm512_permutex2var_ps(c_lo, odd, c_hi);
    const __m512i i_a = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * ox), even);
    __m512 best = a;
    __m512i bi = i_a;
    auto step = [&](__m512 v, __m512i iv) {
      const __mmask16 t = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, v);
      bi = _mm512_mask_blend_epi32(t, bi, iv);
    };
    step(b, _mm512_add_epi32(i_a, _mm512_set1_epi32(1)));
    step(c, _mm512_add_epi32(i_a, _mm512_set1_epi32(w)));
    step(d, _mm512_add_epi32(i_a, _mm512_set1_epi32(w + 1)));
    _mm512_mask_storeu_ps(out + ox, m_out, best);
    _mm512_mask_storeu_epi32(idx + ox, m_out, bi);
  }
}

// Its backward: the two input rows of one output row, each input the dy of its window where it is
// the window's argmax and 0 elsewhere (an argmax ~i matches nothing). Same results as the scatter.
inline void max_unpool_2x2_row_avx512(const float* dy, const int32_t* idx, float* r0, float* r1, int wo, int base,
                                      int w) {
  const __m512i step2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int ox = 0; ox < wo; ox += 16) {
    const int rem = wo - ox < 16 ? wo - ox : 16;
    const int in_n = 2 * rem;
    const __mmask16 m_in = static_cast<__mmask16>(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
    const __mmask16 m_lo = static_cast<__mmask16>(in_n >= 16 ? 0xFFFF : (1u << in_n) - 1);
    const __mmask16 m_hi = static_cast<__mmask16>(in_n <= 16 ? 0 : (in_n >= 32 ? 0xFFFF : (1u << (in_n - 16)) - 1));
    const __m512 d = _mm512_maskz_loadu_ps(m_in, dy + ox);
    const __m512i id = _mm512_maskz_loadu_epi32(m_in, idx + ox);
    const __m512i pa = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * ox), step2);
    auto cell = [&](int offset) {
      return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(id, _mm512_add_epi32(pa, _mm512_set1_epi32(offset))), d);
    };
    const __m512 a = cell(0), b = cell(1), c = cell(w), e = cell(w + 1);
    _mm512_mask_storeu_ps(r0 + 2 * ox, m_lo, _mm512_permutex2var_ps(a, lo, b));
    _mm512_mask_storeu_ps(r0 + 2 * ox + 16, m_hi, _mm512_permutex2var_ps(a, hi, b));
    _mm512_mask_storeu_ps(r1 + 2 * ox, m_lo, _mm512_permutex2var_ps(c, lo, e));
    _mm512_mask_storeu_ps(r1 + 2 * ox + 16, m_hi, _mm512_permutex2var_ps(c, hi, e));
  }
}
#endif

// The same two rows on AVX2 (a CPU without AVX-512, or TANDEM_CPU_ISA=avx2), 8 outputs per step,
// even/odd lanes split by shuffles, the same NaN-aware selects as max_step. No masked stores: AMD's
// vmaskmovps / vpmaskmovd stores are microcoded (~12 cycles each on an AMD EPYC Zen 4, measured,
// against ~0.5 for a plain store), which made the masked tails half of the pool's time there. A row of 8
// outputs or more redoes its last 8 (the overlap rewrites the same values); a shorter row (the cnn's
// 7 x 7 pool) reads with masked loads (cheap on every CPU) and stores as described at each function.
#define TANDEM_POOL_AVX2 __attribute__((target("avx2,fma")))
TANDEM_POOL_AVX2 inline __m256i pool_mask8(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}
// Lanes 0, 2, ..., 14 (EVEN) or 1, 3, ..., 15 of the 16 floats lo:hi, in order.
template <bool EVEN>
TANDEM_POOL_AVX2 inline __m256 pool_deinterleave(__m256 lo, __m256 hi) {
  const __m256 x = _mm256_shuffle_ps(lo, hi, EVEN ? 0x88 : 0xDD);  // lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(x), 0xD8));
}
// Elements n - 8 .. n - 1 of the 16 floats lo:hi (8 <= n <= 16): a row's last 8 values, stored over
// its end without a mask.
TANDEM_POOL_AVX2 inline __m256 pool_last8(__m256 lo, __m256 hi, int n) {
  const __m256i at = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(n - 8));
  const __m256i from_hi = _mm256_cmpgt_epi32(at, _mm256_set1_epi32(7));
  const __m256i lane = _mm256_and_si256(at, _mm256_set1_epi32(7));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, lane), _mm256_permutevar8x32_ps(hi, lane),
                          _mm256_castsi256_ps(from_hi));
}
// The 8 outputs from ox (outputs past the row's end, from masked-off inputs, are garbage), of the rows
// r0 and r1 whose first input is at index base in the plane. `in_n` inputs per row are read from 2 * ox.
TANDEM_POOL_AVX2 inline void max_pool_2x2_step_avx2(const float* r0, const float* r1, int ox, int in_n, int base, int w,
                                                    __m256& best, __m256i& best_i) {
  const __m256i m_lo = pool_mask8(in_n), m_hi = pool_mask8(in_n - 8);
  const float* p0 = r0 + 2 * ox;
  const float* p1 = r1 + 2 * ox;
  const bool full = in_n >= 16;
  const __m256 a_lo = full ? _mm256_loadu_ps(p0) : _mm256_maskload_ps(p0, m_lo);
  const __m256 a_hi = full ? _mm256_loadu_ps(p0 + 8) : _mm256_maskload_ps(p0 + 8, m_hi);
  const __m256 c_lo = full ? _mm256_loadu_ps(p1) : _mm256_maskload_ps(p1, m_lo);
  const __m256 c_hi = full ? _mm256_loadu_ps(p1 + 8) : _mm256_maskload_ps(p1 + 8, m_hi);
  const __m256 a = pool_deinterleave<true>(a_lo, a_hi), b = pool_deinterleave<false>(a_lo, a_hi);
  const __m256 c = pool_deinterleave<true>(c_lo, c_hi), d = pool_deinterleave<false>(c_lo, c_hi);
  const __m256i i_a = _mm256_add_epi32(_mm256_set1_epi32(base + 2 * ox), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
  best = a;
  __m256 bi = _mm256_castsi256_ps(i_a);
  auto step = [&](__m256 v, __m256i iv) {
    const __m256 t = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    best = _mm256_blendv_ps(best, v, t);
    bi = _mm256_blendv_ps(bi, _mm256_castsi256_ps(iv), t);
  };
  step(b, _mm256_add_epi32(i_a, _mm256_set1_epi32(1)));
  step(c, _mm256_add_epi32(i_a, _mm256_set1_epi32(w)));
  step(d, _mm256_add_epi32(i_a, _mm256_set1_epi32(w + 1)));
  best_i = _mm256_castps_si256(bi);
}
// One output row. A row shorter than 8 is stored as 8 values when `spare` (8 - wo or more writable
// elements follow the row that the caller writes afterwards: the plane's later rows), else through a
// buffer, element by element.
TANDEM_POOL_AVX2 inline void max_pool_2x2_row_avx2(const float* r0, const float* r1, float* out, int32_t* idx, int wo,
                                                   int base, int w, bool spare) {
  __m256 best;
  __m256i bi;
  if (wo >= 8) {
    for (int ox = 0;; ox += 8) {
      ox = ox + 8 <= wo ? ox : wo - 8;  // the last step ends at the row's end
      max_pool_2x2_step_avx2(r0, r1, ox, 16, base, w, best, bi);
      _mm256_storeu_ps(out + ox, best);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ox), bi);
      if (ox + 8 == wo) return;
    }
  }
  max_pool_2x2_step_avx2(r0, r1, 0, 2 * wo, base, w, best, bi);
  if (spare) {
    _mm256_storeu_ps(out, best);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx), bi);
    return;
  }
  alignas(32) float vals[8];
  alignas(32) int32_t args[8];
  _mm256_store_ps(vals, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(args), bi);
  for (int q = 0; q < wo; ++q) {
    out[q] = vals[q];
    idx[q] = args[q];
  }
}
// Its backward, as max_unpool_2x2_row_avx512: the 2 * wo values of rows r0 and r1 (a row under 4
// outputs, under 8 inputs, with masked stores).
TANDEM_POOL_AVX2 inline void max_unpool_2x2_row_avx2(const float* dy, const int32_t* idx, float* r0, float* r1, int wo,
                                                     int base, int w) {
  const __m256i two_k = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int ox = 0;; ox += 8) {
    if (wo >= 8 && ox + 8 > wo) ox = wo - 8;  // the last step ends at the row's end
    const int rem = wo - ox < 8 ? wo - ox : 8, in_n = 2 * rem;
    const __m256i m_in = pool_mask8(rem);
    const __m256 d = rem == 8 ? _mm256_loadu_ps(dy + ox) : _mm256_maskload_ps(dy + ox, m_in);
    const __m256i id = rem == 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + ox))
                                : _mm256_maskload_epi32(idx + ox, m_in);
    const __m256i pa = _mm256_add_epi32(_mm256_set1_epi32(base + 2 * ox), two_k);
    auto cell = [&](int offset) {
      return _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(id, _mm256_add_epi32(pa, _mm256_set1_epi32(offset)))), d);
    };
    auto store_row = [&](float* r, __m256 even, __m256 odd) {  // r[2k] = even[k], r[2k + 1] = odd[k]
      const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
      const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
      if (in_n < 8) {
        _mm256_maskstore_ps(r + 2 * ox, pool_mask8(in_n), first);
        return;
      }
      _mm256_storeu_ps(r + 2 * ox, first);
      if (in_n == 16)
        _mm256_storeu_ps(r + 2 * ox + 8, second);
      else if (in_n > 8)
        _mm256_storeu_ps(r + 2 * ox + in_n - 8, pool_last8(first, second, in_n));
    };
    store_row(r0, cell(0), cell(1));
    store_row(r1, cell(w), cell(w + 1));
    if (ox + rem == wo) return;
  }
}

// out [ho, wo] and idx [ho, wo] (index iy * w + ix in the plane) of the plane `in` [h, w].
template <class T>
void max_pool_plane(const T* in, T* out, int32_t* idx, const Pool2dGeometry& g) {
  using A = acc_t<T>;
  const bool fast2x2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  if (fast2x2) {  // the cnn's pooling (AVX-512 rows, else AVX2 rows, else a loop the compiler vectorises over ox)
    const int wo = static_cast<int>(g.wo), w = static_cast<int>(g.w);
#if defined(__AVX512F__)  // a build for AVX-512 (-march); TANDEM_CPU_ISA=avx2 takes the loop below
    if constexpr (std::is_same_v<T, float>) {
      if (cpu_isa_allows(CpuIsa::avx512)) {
        for (int64_t oy = 0; oy < g.ho; ++oy)
          max_pool_2x2_row_avx512(in + 2 * oy * g.w, in + (2 * oy + 1) * g.w, out + oy * g.wo, idx + oy * g.wo, wo,
                                  static_cast<int>(2 * oy * g.w), w);
        return;
      }
    }
#endif
    if constexpr (std::is_same_v<T, float>) {
      if (cpu_isa_usable(CpuIsa::avx2)) {
        // A short row's 8-value stores run into the next rows, written after it; not the plane's last.
        for (int64_t oy = 0; oy < g.ho; ++oy)
          max_pool_2x2_row_avx2(in + 2 * oy * g.w, in + (2 * oy + 1) * g.w, out + oy * g.wo, idx + oy * g.wo, wo,
                                static_cast<int>(2 * oy * g.w), w, oy * g.wo + 8 <= g.ho * g.wo);
        return;
      }
    }
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      const T* __restrict r0 = in + 2 * oy * g.w;
      const T* __restrict r1 = r0 + g.w;
      T* __restrict o = out + oy * g.wo;
      int32_t* __restrict oi = idx + oy * g.wo;
      const int base = static_cast<int>(2 * oy * g.w);
      for (int ox = 0; ox < wo; ++ox) {
        const A a = static_cast<A>(r0[2 * ox]), b = static_cast<A>(r0[2 * ox + 1]);
        const A c = static_cast<A>(r1[2 * ox]), d = static_cast<A>(r1[2 * ox + 1]);
        A best = a;
        int bi = base + 2 * ox;
        bool t = b > best || b != b;  // larger, or NaN (which then propagates)
        best = t ? b : best;
        bi = t ? base + 2 * ox + 1 : bi;
        t = c > best || c != c;
        best = t ? c : best;
        bi = t ? base + w + 2 * ox : bi;
        t = d > best || d != d;
        best = t ? d : best;
        bi = t ? base + w + 2 * ox + 1 : bi;
        o[ox] = T(best);
        oi[ox] = bi;
      }
    }
    return;
  }
  for (int64_t oy = 0; oy < g.ho; ++oy) {
    const int64_t y0 = std::max<int64_t>(oy * g.sh - g.ph, 0), y1 = std::min(oy * g.sh - g.ph + g.kh, g.h);
    for (int64_t ox = 0; ox < g.wo; ++ox) {
      const int64_t x0 = std::max<int64_t>(ox * g.sw - g.pw, 0), x1 = std::min(ox * g.sw - g.pw + g.kw, g.w);
      A best = -std::numeric_limits<A>::infinity();
      int32_t best_i = static_cast<int32_t>(y0 * g.w + x0);
      for (int64_t iy = y0; iy < y1; ++iy)
        for (int64_t ix = x0; ix < x1; ++ix)
          max_step(static_cast<A>(in[iy * g.w + ix]), static_cast<int32_t>(iy * g.w + ix), best, best_i);
      out[oy * g.wo + ox] = T(best);
      idx[oy * g.wo + ox] = best_i;
    }
  }
}

// The plane's gradient dx [h, w]: dy [ho, wo] added at idx (overlapping windows add up), zero elsewhere.
// A negative idx (~i, i the index) drops its dy: batch norm's fused epilogue marks so the outputs
// that relu zeroed. Branch-free (relu's signs are random): such a dy adds an exact +0 at i (or, in
// the AVX-512 and AVX2 2x2 paths, matches no index).
template <class T>
void max_unpool_plane(const T* dy, const int32_t* idx, T* dx, const Pool2dGeometry& g) {
  using A = acc_t<T>;
  const int64_t hw = g.h * g.w, ohw = g.ho * g.wo;
  if constexpr (std::is_same_v<T, float>) {
    bool avx512 = false;
#if defined(__AVX512F__)  // as max_pool_plane
    avx512 = cpu_isa_allows(CpuIsa::avx512);
#endif
    if ((avx512 || cpu_isa_usable(CpuIsa::avx2)) && g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 &&
        g.pw == 0) {
      // The cnn's pool: windows are disjoint, so dx is written once, two rows per output row, instead
      // of zero-filled and then scattered into (a read-modify-write per window that waits on the fill).
      const int64_t covered = 2 * g.wo;
      for (int64_t oy = 0; oy < g.ho; ++oy) {
        float* r0 = dx + 2 * oy * g.w;
        float* r1 = r0 + g.w;
#if defined(__AVX512F__)
        if (avx512) {
          max_unpool_2x2_row_avx512(dy + oy * g.wo, idx + oy * g.wo, r0, r1, static_cast<int>(g.wo),
                                    static_cast<int>(2 * oy * g.w), static_cast<int>(g.w));
        } else
#endif
        {
          max_unpool_2x2_row_avx2(dy + oy * g.wo, idx + oy * g.wo, r0, r1, static_cast<int>(g.wo),
                                  static_cast<int>(2 * oy * g.w), static_cast<int>(g.w));
        }
        std::fill(r0 + covered, r0 + g.w, 0.0f);  // an odd width's last column
        std::fill(r1 + covered, r1 + g.w, 0.0f);
      }
      std::fill(dx + 2 * g.ho * g.w, dx + hw, 0.0f);  // an odd height's last row
      return;
    }
  }
  if constexpr (std::is_same_v<A, T>) {
    std::fill(dx, dx + hw, T(0));
    for (int64_t q = 0; q < ohw; ++q) {
      const bool keep = idx[q] >= 0;
      dx[keep ? idx[q] : ~idx[q]] += keep ? dy[q] : T(0);
    }
  } else {  // accumulate overlapping windows in f32, round once
    std::vector<float> acc(static_cast<size_t>(hw), 0.0f);
    for (int64_t q = 0; q < ohw; ++q) {
      const bool keep = idx[q] >= 0;
      acc[static_cast<size_t>(keep ? idx[q] : ~idx[q])] += keep ? static_cast<float>(dy[q]) : 0.0f;
    }
    for (int64_t i = 0; i < hw; ++i) dx[i] = T(acc[static_cast<size_t>(i)]);
  }
}

}  // namespace tandem::kernels::cpu_pool
