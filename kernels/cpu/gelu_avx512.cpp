// 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3) is x * sigmoid(2u) = x / (1 + e^(-2u)):
// one exp and one division per value instead of a tanh. It is also the more accurate form where x is
// very negative: 1 + tanh(u) cancels there, e^(-2u) does not. The gradient: 0.5 (1 + t) = s and
// 0.5 x (1 - t^2) u' = 2 x s (1 - s) u', with s = sigmoid(2u) and 1 - s = e s (no cancellation
// either).
#include "kernels/cpu/gelu_avx512.h"

// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsics once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/gemm_avx512_kernels.h"

namespace tandem::kernels::avx512 {
namespace {

constexpr float kC1 = 0.79788456080286535588f;  // sqrt(2 / pi)
constexpr float kC2 = 0.044715f;
constexpr float kLog2e = 1.44269504088896341f;

// e^(-2u) = 2^t with t = -2u log2(e) = x (a + b x^2): t = n + f with n = round(t) and |f| <= 1/2
// (f = t - n is exact), 2^f by a degree-6 polynomial fitted to its relative error (1.6e-8 in f64;
// tests/reference/fit_exp_poly.py), times 2^n by vscalefps. t is clamped to [-126, 129]: below,
// 2^t is under f32's smallest normal and s = 1 exactly anyway; above, it overflows to inf, so that
// s = 0 and gelu(x) = x / inf = -0 where the true value underflows too. NaN stays NaN (max and min
// return their second operand when either is NaN).
TANDEM_AVX512_INLINE __m512 exp_minus_2u(__m512 x, __m512 x2) {
  const __m512 w =
      _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.0f * kC1 * kC2 * kLog2e), _mm512_set1_ps(-2.0f * kC1 * kLog2e));
  __m512 t = _mm512_mul_ps(x, w);
  t = _mm512_max_ps(_mm512_set1_ps(-126.0f), t);
  t = _mm512_min_ps(_mm512_set1_ps(129.0f), t);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(0.000153375775f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.00133998599f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.00961851981f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0555032901f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240226462f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693147182f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

TANDEM_AVX512_INLINE __m512 gelu(__m512 x) {
  const __m512 e = exp_minus_2u(x, _mm512_mul_ps(x, x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// 1 - s = e s, which is inf * 0 where e overflowed: min(NaN, 1) is 1 there (min returns its second
// operand on NaN), the true 1 - s. A NaN x keeps s NaN, so the result is NaN all the same.
TANDEM_AVX512_INLINE __m512 gelu_grad(__m512 g, __m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 e = exp_minus_2u(x, x2);
  const __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __m512 one_minus_s = _mm512_min_ps(_mm512_mul_ps(e, s), _mm512_set1_ps(1.0f));
  const __m512 du = _mm512_fmadd_ps(x2, _mm512_set1_ps(3.0f * kC1 * kC2), _mm512_set1_ps(kC1));
  const __m512 two_x_s = _mm512_mul_ps(_mm512_add_ps(x, x), s);
  return _mm512_mul_ps(g, _mm512_fmadd_ps(_mm512_mul_ps(two_x_s, one_minus_s), du, s));
}

}  // namespace

TANDEM_AVX512 void gelu_tanh_f32(const float* x, const float* g, float* out, int64_t n) {
  int64_t i = 0;
  if (!g) {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gelu(_mm512_loadu_ps(x + i)));
    if (i < n) {
      const __mmask16 m = low_mask16(static_cast<int>(n - i));
      _mm512_mask_storeu_ps(out + i, m, gelu(_mm512_maskz_loadu_ps(m, x + i)));
    }
    return;
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gelu_grad(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = low_mask16(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(out + i, m, gelu_grad(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace tandem::kernels::avx512
