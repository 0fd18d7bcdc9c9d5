// lanes_avx2.h: 16 lanes in two ymm registers (lo: lanes 0-7, hi: 8-15), products added by FMA where
// lanes.h's loops contract them (acc += d * d, b += dy * (x - m)), so that both give the same sums.
#include "kernels/cpu/lanes_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/widen_avx2.h"
#include "runtime/backend/cpu_isa.h"

// TANDEM_AVX2 (widen_avx2.h): with F16C for the 16-bit variants' widening (every CPU that
// lanes_usable() or cpu_isa_usable(avx2) accepts has it).
#define TANDEM_LANES_AVX2 TANDEM_AVX2

namespace tandem::kernels::avx2 {
namespace {

// The 16 lanes added in order from 0, as lanes.h's hsum.
TANDEM_LANES_AVX2 inline float hsum16(__m256 lo, __m256 hi) {
  alignas(32) float t[16];
  _mm256_store_ps(t, lo);
  _mm256_store_ps(t + 8, hi);
  float s = 0.0f;
  for (int l = 0; l < 16; ++l) s += t[l];
  return s;
}

// G rows k0 .. k0 + G - 1 of small_k_dots (and the bias sum when db): 2G + 2 accumulators. S: float,
// or F16 / BF16 (widen_avx2.h) widened as they are read, so the sums are those of a widened copy.
template <int G, class S>
TANDEM_LANES_AVX2 void dots_group(const S* dy, const S* cols, int64_t ld, int64_t L, float* dw, float* db) {
  __m256 lo[G > 0 ? G : 1], hi[G > 0 ? G : 1], b_lo = _mm256_setzero_ps(), b_hi = _mm256_setzero_ps();
  for (int k = 0; k < G; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  int64_t q = 0;
  for (; q + 16 <= L; q += 16) {
    const __m256 d0 = load8(dy + q), d1 = load8(dy + q + 8);
    if (db) {
      b_lo = _mm256_add_ps(b_lo, d0);
      b_hi = _mm256_add_ps(b_hi, d1);
    }
    for (int k = 0; k < G; ++k) {
      lo[k] = _mm256_fmadd_ps(d0, load8(cols + k * ld + q), lo[k]);
      hi[k] = _mm256_fmadd_ps(d1, load8(cols + k * ld + q + 8), hi[k]);
    }
  }
  for (int k = 0; k < G; ++k) {
    float sum = hsum16(lo[k], hi[k]);
    for (int64_t t = q; t < L; ++t) sum = std::fma(widen1(dy[t]), widen1(cols[k * ld + t]), sum);
    dw[k] += sum;
  }
  if (db) {
    float sum = hsum16(b_lo, b_hi);
    for (int64_t t = q; t < L; ++t) sum += widen1(dy[t]);
    *db += sum;
  }
}

template <class S>
TANDEM_LANES_AVX2 void small_k_dots(const S* dy, const S* cols, int64_t ld, int64_t L, int64_t K, float* dw,
                                    float* db) {
  int64_t k = 0;
  for (; k + 4 <= K; k += 4, db = nullptr) dots_group<4>(dy, cols + k * ld, ld, L, dw + k, db);
  switch (K - k) {
    case 3: dots_group<3>(dy, cols + k * ld, ld, L, dw + k, db); break;
    case 2: dots_group<2>(dy, cols + k * ld, ld, L, dw + k, db); break;
    case 1: dots_group<1>(dy, cols + k * ld, ld, L, dw + k, db); break;
    default:
      if (db) dots_group<0>(dy, cols, ld, L, dw, db);
  }
}

// sum p[i] over the 16 lanes: f32, or F16 / BF16 widened as they are read (the same lanes and order).
template <class S>
TANDEM_LANES_AVX2 float sum_lanes(const S* p, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, load8(p + i));
    hi = _mm256_add_ps(hi, load8(p + i + 8));
  }
  float s = hsum16(lo, hi);
  for (; i < n; ++i) s += widen1(p[i]);
  return s;
}

}  // namespace

bool lanes_usable() {
  static const bool usable = cpu_isa_usable(CpuIsa::avx2) && !cpu_isa_usable(CpuIsa::avx512);
  return usable;
}

float sum_f32(const float* p, int64_t n) { return sum_lanes(p, n); }

float sum_16bit(const uint16_t* p, int64_t n, bool f16) {
  return f16 ? sum_lanes(reinterpret_cast<const F16*>(p), n) : sum_lanes(reinterpret_cast<const BF16*>(p), n);
}

TANDEM_LANES_AVX2 float sum_sq_dev_f32(const float* p, int64_t n, float mu) {
  const __m256 m = _mm256_set1_ps(mu);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(p + i), m), d1 = _mm256_sub_ps(_mm256_loadu_ps(p + i + 8), m);
    lo = _mm256_fmadd_ps(d0, d0, lo);
    hi = _mm256_fmadd_ps(d1, d1, hi);
  }
  float s = hsum16(lo, hi);
  for (; i < n; ++i) {
    const float d = p[i] - mu;
    s = std::fma(d, d, s);
  }
  return s;
}

TANDEM_LANES_AVX2 void sum_dy_dyxmu_f32(const float* dy, const float* x, int64_t n, float m, float& a, float& b) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 a_lo = _mm256_setzero_ps(), a_hi = _mm256_setzero_ps(), b_lo = _mm256_setzero_ps(),
         b_hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_loadu_ps(dy + i), d1 = _mm256_loadu_ps(dy + i + 8);
    a_lo = _mm256_add_ps(a_lo, d0);
    a_hi = _mm256_add_ps(a_hi, d1);
    b_lo = _mm256_fmadd_ps(d0, _mm256_sub_ps(_mm256_loadu_ps(x + i), mv), b_lo);
    b_hi = _mm256_fmadd_ps(d1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv), b_hi);
  }
  float sa = hsum16(a_lo, a_hi), sb = hsum16(b_lo, b_hi);
  for (; i < n; ++i) {
    sa += dy[i];
    sb = std::fma(dy[i], x[i] - m, sb);
  }
  a = sa;
  b = sb;
}

TANDEM_LANES_AVX2 void sum_g_gxhat_f32(const float* dy, const float* w, const float* x, int64_t n, float mu, float r,
                                       float& a, float& b) {
  const __m256 mv = _mm256_set1_ps(mu), rv = _mm256_set1_ps(r);
  __m256 a_lo = _mm256_setzero_ps(), a_hi = _mm256_setzero_ps(), b_lo = _mm256_setzero_ps(),
         b_hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 g0 = _mm256_mul_ps(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(w + i));
    const __m256 g1 = _mm256_mul_ps(_mm256_loadu_ps(dy + i + 8), _mm256_loadu_ps(w + i + 8));
    a_lo = _mm256_add_ps(a_lo, g0);
    a_hi = _mm256_add_ps(a_hi, g1);
    b_lo = _mm256_fmadd_ps(_mm256_mul_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i), mv)), rv, b_lo);
    b_hi = _mm256_fmadd_ps(_mm256_mul_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv)), rv, b_hi);
  }
  float sa = hsum16(a_lo, a_hi), sb = hsum16(b_lo, b_hi);
  for (; i < n; ++i) {
    const float g = dy[i] * w[i];
    sa += g;
    sb = std::fma(g * (x[i] - mu), r, sb);
  }
  a = sa;
  b = sb;
}

// Four rows of dw at a time (10 of the 16 registers hold sums and dy), dy re-read from L1 per group.
void small_k_dots_f32(const float* dy, const float* cols, int64_t ld, int64_t L, int64_t K, float* dw, float* db) {
  small_k_dots(dy, cols, ld, L, K, dw, db);
}

void small_k_dots_16bit(const uint16_t* dy, const uint16_t* cols, int64_t ld, int64_t L, int64_t K, float* dw,
                        float* db, bool f16) {
  if (f16)
    small_k_dots(reinterpret_cast<const F16*>(dy), reinterpret_cast<const F16*>(cols), ld, L, K, dw, db);
  else
    small_k_dots(reinterpret_cast<const BF16*>(dy), reinterpret_cast<const BF16*>(cols), ld, L, K, dw, db);
}

}  // namespace tandem::kernels::avx2
