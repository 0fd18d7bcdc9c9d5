// lanes_avx2.h: 16 lanes in two ymm registers (lo: lanes 0-7, hi: 8-15), products added by FMA where
// lanes.h's loops contract them (acc += d * d, b += dy * (x - m)), so that both give the same sums.
#include "kernels/cpu/lanes_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "runtime/backend/common/half.h"
#include "runtime/backend/cpu_isa.h"

// F16C for the 16-bit variants' widening: every CPU that lanes_usable() or cpu_isa_usable(avx2)
// accepts has it.
#define TANDEM_LANES_AVX2 __attribute__((target("avx2,fma,f16c")))

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

// The elements small_k_dots reads: f32, or 16-bit values widened exactly as they are loaded (F16C's
// vcvtph2ps for f16, the bits moved up for bf16), so the sums are those of a widened copy.
struct F32 {
  using type = float;
};
struct F16 {
  using type = uint16_t;
};
struct BF16 {
  using type = uint16_t;
};
TANDEM_LANES_AVX2 inline __m256 load8(F32, const float* p) { return _mm256_loadu_ps(p); }
TANDEM_LANES_AVX2 inline __m256 load8(F16, const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
TANDEM_LANES_AVX2 inline __m256 load8(BF16, const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
TANDEM_LANES_AVX2 inline float load1(F32, const float* p) { return *p; }
TANDEM_LANES_AVX2 inline float load1(F16, const uint16_t* p) { return _cvtsh_ss(*p); }
TANDEM_LANES_AVX2 inline float load1(BF16, const uint16_t* p) { return bf16_bits_to_float(*p); }

// G rows k0 .. k0 + G - 1 of small_k_dots (and the bias sum when db): 2G + 2 accumulators.
template <int G, class E, class V = typename E::type>
TANDEM_LANES_AVX2 void dots_group(const V* dy, const V* cols, int64_t ld, int64_t L, float* dw, float* db) {
  __m256 lo[G > 0 ? G : 1], hi[G > 0 ? G : 1], b_lo = _mm256_setzero_ps(), b_hi = _mm256_setzero_ps();
  for (int k = 0; k < G; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  int64_t q = 0;
  for (; q + 16 <= L; q += 16) {
    const __m256 d0 = load8(E{}, dy + q), d1 = load8(E{}, dy + q + 8);
    if (db) {
      b_lo = _mm256_add_ps(b_lo, d0);
      b_hi = _mm256_add_ps(b_hi, d1);
    }
    for (int k = 0; k < G; ++k) {
      lo[k] = _mm256_fmadd_ps(d0, load8(E{}, cols + k * ld + q), lo[k]);
      hi[k] = _mm256_fmadd_ps(d1, load8(E{}, cols + k * ld + q + 8), hi[k]);
    }
  }
  for (int k = 0; k < G; ++k) {
    float sum = hsum16(lo[k], hi[k]);
    for (int64_t t = q; t < L; ++t) sum = std::fma(load1(E{}, dy + t), load1(E{}, cols + k * ld + t), sum);
    dw[k] += sum;
  }
  if (db) {
    float sum = hsum16(b_lo, b_hi);
    for (int64_t t = q; t < L; ++t) sum += load1(E{}, dy + t);
    *db += sum;
  }
}

template <class E, class V = typename E::type>
TANDEM_LANES_AVX2 void small_k_dots(const V* dy, const V* cols, int64_t ld, int64_t L, int64_t K, float* dw,
                                    float* db) {
  int64_t k = 0;
  for (; k + 4 <= K; k += 4, db = nullptr) dots_group<4, E>(dy, cols + k * ld, ld, L, dw + k, db);
  switch (K - k) {
    case 3: dots_group<3, E>(dy, cols + k * ld, ld, L, dw + k, db); break;
    case 2: dots_group<2, E>(dy, cols + k * ld, ld, L, dw + k, db); break;
    case 1: dots_group<1, E>(dy, cols + k * ld, ld, L, dw + k, db); break;
    default:
      if (db) dots_group<0, E>(dy, cols, ld, L, dw, db);
  }
}

// sum_f32's lanes and order over 16-bit values widened as they are read.
template <class E>
TANDEM_LANES_AVX2 float sum_widened(const uint16_t* p, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, load8(E{}, p + i));
    hi = _mm256_add_ps(hi, load8(E{}, p + i + 8));
  }
  float s = hsum16(lo, hi);
  for (; i < n; ++i) s += load1(E{}, p + i);
  return s;
}

}  // namespace

bool lanes_usable() {
  static const bool usable = cpu_isa_usable(CpuIsa::avx2) && !cpu_isa_usable(CpuIsa::avx512);
  return usable;
}

TANDEM_LANES_AVX2 float sum_f32(const float* p, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(p + i));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(p + i + 8));
  }
  float s = hsum16(lo, hi);
  for (; i < n; ++i) s += p[i];
  return s;
}

float sum_16bit(const uint16_t* p, int64_t n, bool f16) {
  return f16 ? sum_widened<F16>(p, n) : sum_widened<BF16>(p, n);
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
  small_k_dots<F32>(dy, cols, ld, L, K, dw, db);
}

void small_k_dots_16bit(const uint16_t* dy, const uint16_t* cols, int64_t ld, int64_t L, int64_t K, float* dw,
                        float* db, bool f16) {
  if (f16)
    small_k_dots<F16>(dy, cols, ld, L, K, dw, db);
  else
    small_k_dots<BF16>(dy, cols, ld, L, K, dw, db);
}

}  // namespace tandem::kernels::avx2
