// gelu_avx512.cpp's x / (1 + e^(-2u)) and its gradient with ymm registers. AVX2 has no vscalefps:
// 2^n (n in [-126, 129]) is built in the exponent field and multiplied once (rounding once, to a
// denormal at the low end, as vscalefps does); 8 values with n = 128 or 129 among them take two
// exact powers of two, 2^(n >> 1) and 2^(n - (n >> 1)), the first product exact, the second rounding
// once (or to inf). vroundps replaces vrndscaleps (both
// to nearest even), so every value has the AVX-512 kernel's bits.
#include "kernels/cpu/gelu_avx2.h"

#include <immintrin.h>

#define TANDEM_GELU_AVX2 __attribute__((target("avx2,fma")))
#define TANDEM_GELU_AVX2_INLINE TANDEM_GELU_AVX2 inline __attribute__((always_inline))

namespace tandem::kernels::avx2 {
namespace {

constexpr float kC1 = 0.79788456080286535588f;  // sqrt(2 / pi)
constexpr float kC2 = 0.044715f;
constexpr float kLog2e = 1.44269504088896341f;

TANDEM_GELU_AVX2_INLINE __m256i tail_mask(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

// 2^e for integer e in [-126, 127], as the bits of a normal float.
TANDEM_GELU_AVX2_INLINE __m256 pow2(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

// As gelu_avx512.cpp's exp_minus_2u: t clamped to [-126, 129], n = round(t), 2^f by the same
// degree-6 polynomial, times 2^n.
TANDEM_GELU_AVX2_INLINE __m256 exp_minus_2u(__m256 x, __m256 x2) {
  const __m256 w =
      _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.0f * kC1 * kC2 * kLog2e), _mm256_set1_ps(-2.0f * kC1 * kLog2e));
  __m256 t = _mm256_mul_ps(x, w);
  t = _mm256_max_ps(_mm256_set1_ps(-126.0f), t);
  t = _mm256_min_ps(_mm256_set1_ps(129.0f), t);
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  __m256 p = _mm256_set1_ps(0.000153375775f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.00133998599f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.00961851981f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.0555032901f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.240226462f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.693147182f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  // A NaN t converts to INT_MIN; p is NaN there already, and NaN times anything stays NaN.
  const __m256i ni = _mm256_cvtps_epi32(n);
  // n <= 127 in every lane (all but x below about -9.2): 2^n is a normal float, one product.
  const __m256i big = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
  if (_mm256_testz_si256(big, big)) return _mm256_mul_ps(p, pow2(ni));
  const __m256i half = _mm256_srai_epi32(ni, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(half)), pow2(_mm256_sub_epi32(ni, half)));
}

TANDEM_GELU_AVX2_INLINE __m256 gelu(__m256 x) {
  const __m256 e = exp_minus_2u(x, _mm256_mul_ps(x, x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// As gelu_avx512.cpp's: 1 - s = e s, min(NaN, 1) = 1 where e overflowed.
TANDEM_GELU_AVX2_INLINE __m256 gelu_grad(__m256 g, __m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 e = exp_minus_2u(x, x2);
  const __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 one_minus_s = _mm256_min_ps(_mm256_mul_ps(e, s), _mm256_set1_ps(1.0f));
  const __m256 du = _mm256_fmadd_ps(x2, _mm256_set1_ps(3.0f * kC1 * kC2), _mm256_set1_ps(kC1));
  const __m256 two_x_s = _mm256_mul_ps(_mm256_add_ps(x, x), s);
  return _mm256_mul_ps(g, _mm256_fmadd_ps(_mm256_mul_ps(two_x_s, one_minus_s), du, s));
}

}  // namespace

TANDEM_GELU_AVX2 void gelu_tanh_f32(const float* x, const float* g, float* out, int64_t n) {
  int64_t i = 0;
  if (!g) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu(_mm256_loadu_ps(x + i)));
    if (i < n) {
      const __m256i m = tail_mask(static_cast<int>(n - i));
      _mm256_maskstore_ps(out + i, m, gelu(_mm256_maskload_ps(x + i, m)));
    }
    return;
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu_grad(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(static_cast<int>(n - i));
    _mm256_maskstore_ps(out + i, m, gelu_grad(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(x + i, m)));
  }
}

}  // namespace tandem::kernels::avx2
