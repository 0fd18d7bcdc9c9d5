// AVX-512 f32 <-> f16/bf16 conversion loops (16 elements per step, masked tail); the functions with
// intrinsics carry a target attribute and internal linkage, so a CPU without AVX-512 never runs them.
#include "runtime/convert_avx512.h"

#include <immintrin.h>

#include "runtime/backend/cpu_isa.h"

// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsics once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define TANDEM_CVT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace tandem {
namespace {

TANDEM_CVT_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// bf16 -> f32: the bits in the upper half.
TANDEM_CVT_AVX512 void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

// f32 -> bf16, round to nearest even; NaN -> its upper half with the quiet bit set (as the scalar).
TANDEM_CVT_AVX512 void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, s + i);
    const __m512i x = _mm512_castps_si512(v), hi = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtepi32_epi16(r));
  }
}

// f16 -> f32: vcvtph2ps is exact; only NaNs differ (it quiets them; the scalar keeps the payload).
TANDEM_CVT_AVX512 void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7c00), man_mask = _mm512_set1_epi32(0x3ff);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, s + i);
    const __m512i w = _mm512_cvtepu16_epi32(h);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(w, exp_mask), exp_mask) &
                          _mm512_test_epi32_mask(w, man_mask);
    const __m512i nan_bits = _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16), _mm512_set1_epi32(0x7f800000)),
        _mm512_slli_epi32(_mm512_and_si512(w, man_mask), 13));
    const __m512i f = _mm512_mask_mov_epi32(_mm512_castps_si512(_mm512_cvtph_ps(h)), nan, nan_bits);
    _mm512_mask_storeu_ps(d + i, m, _mm512_castsi512_ps(f));
  }
}

// f32 -> f16: vcvtps2ph rounds to nearest even (subnormals and overflow to inf as IEEE); NaNs become
// sign | 0x7e00 as in the scalar.
TANDEM_CVT_AVX512 void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, s + i);
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i x = _mm512_castps_si512(v);
    const __m512i nan_bits = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x8000)),
                                             _mm512_set1_epi32(0x7e00));
    const __m256i r = _mm256_mask_mov_epi16(h, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_cvtepi32_epi16(nan_bits));
    _mm256_mask_storeu_epi16(d + i, m, r);
  }
}

bool cpu_ok() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") &&  // the 512-bit vcvtph2ps/vcvtps2ph are AVX-512F
                         cpu_isa_allows(CpuIsa::avx512);
  return ok;
}

// A loop behind the ConvertLoop signature.
template <class S, class D, void (*F)(const S*, D*, int64_t)>
TANDEM_CVT_AVX512 void loop(const void* src, void* dst, int64_t n) {
  F(static_cast<const S*>(src), static_cast<D*>(dst), n);
}

}  // namespace

const ConvertLoops* convert_avx512_loops() {
  static const ConvertLoops loops{&loop<float, uint16_t, f32_to_f16>, &loop<uint16_t, float, f16_to_f32>,
                                  &loop<float, uint16_t, f32_to_bf16>, &loop<uint16_t, float, bf16_to_f32>};
  return cpu_ok() ? &loops : nullptr;
}

}  // namespace tandem
