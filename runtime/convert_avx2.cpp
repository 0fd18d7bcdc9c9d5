// AVX2 + F16C f32 <-> f16/bf16 conversion loops, 16 elements per step (then 8) and the scalar
// conversions for the last n % 8 (the same bits: the loops are written to equal them; one NaN test
// covers a step of 16, and the NaN fix-ups run only for 8 values with a NaN among them, through the
// 8-value functions); the functions with intrinsics carry a target
// attribute and internal linkage, so a CPU without AVX2/F16C never runs them. Without
// them an f16 GEMM or autocast cast converted element by element: the cnn under --amp f16 ran at 0.29x
// its fp32 speed on the AVX2 path (docs/cpu-kernels.md).
#include "runtime/convert_avx2.h"

#include <immintrin.h>

#include "runtime/backend/common/half.h"
#include "runtime/backend/cpu_isa.h"

#define TANDEM_CVT_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tandem {
namespace {

// bf16 -> f32: the bits in the upper half, 16 a step.
TANDEM_CVT_AVX2 void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i zero = _mm256_setzero_si256();
    // unpack puts each value in the upper half of a 32-bit lane, within 128-bit lanes: values 0-3 and
    // 8-11 in lo, 4-7 and 12-15 in hi; the permutes restore the order.
    const __m256i lo = _mm256_unpacklo_epi16(zero, h), hi = _mm256_unpackhi_epi16(zero, h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) d[i] = bf16_bits_to_float(s[i]);
}

// 8 32-bit lanes holding 16-bit values -> 8 packed uint16.
TANDEM_CVT_AVX2 inline __m128i pack_low16(__m256i r) {
  const __m256i p = _mm256_packus_epi32(r, r);  // lanes 0-3 | 0-3 | 4-7 | 4-7 (values < 65536)
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

// f32 -> bf16, round to nearest even; NaN -> its upper half with the quiet bit set (as the scalar).
// The rounding of 8 values, in the low 16 bits of 32-bit lanes: bf16_rne8 alone (right for every
// value but NaN), bf16_round8 with the NaN select where a NaN is.
TANDEM_CVT_AVX2 inline __m256i bf16_rne8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
}
TANDEM_CVT_AVX2 inline __m256i bf16_round8(__m256 v) {
  const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
  const __m256i r = bf16_rne8(v);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (_mm256_testz_ps(nan, nan)) return r;
  return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), _mm256_castps_si256(nan));
}

TANDEM_CVT_AVX2 void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 va = _mm256_loadu_ps(s + i), vb = _mm256_loadu_ps(s + i + 8);
    // One test for the 16 (unordered: a NaN in either operand's lane), the 8-value NaN paths only past it.
    const __m256 nan = _mm256_cmp_ps(va, vb, _CMP_UNORD_Q);
    __m256i a, b;
    if (_mm256_testz_ps(nan, nan)) {
      a = bf16_rne8(va);
      b = bf16_rne8(vb);
    } else {
      a = bf16_round8(va);
      b = bf16_round8(vb);
    }
    // packus within 128-bit lanes: a0-3 b0-3 | a4-7 b4-7; the 64-bit permute puts them in order.
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), p);
  }
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16(bf16_round8(_mm256_loadu_ps(s + i))));
  for (; i < n; ++i) d[i] = float_to_bf16_bits(s[i]);
}

// f16 -> f32: vcvtph2ps is exact; only NaNs differ (it quiets them; the scalar keeps the payload),
// so 8 values with a NaN among them (|h| > 0x7c00) are rewritten to the scalar's bits.
TANDEM_CVT_AVX2 inline __m256 f16_widen8(__m128i h) {
  const __m256 f = _mm256_cvtph_ps(h);
  const __m128i nan16 = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
  if (_mm_testz_si128(nan16, nan16)) return f;
  const __m256i w = _mm256_cvtepu16_epi32(h), man_mask = _mm256_set1_epi32(0x3ff);
  const __m256i nan_bits = _mm256_or_si256(
      _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                      _mm256_set1_epi32(0x7f800000)),
      _mm256_slli_epi32(_mm256_and_si256(w, man_mask), 13));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_castps_si256(f), nan_bits, _mm256_cvtepi16_epi32(nan16)));
}

TANDEM_CVT_AVX2 void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // One NaN test for the 16 (|h| > 0x7c00 on 16-bit lanes), vcvtph2ps on each half.
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i nan16 = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7c00));
    const __m128i h0 = _mm256_castsi256_si128(h), h1 = _mm256_extracti128_si256(h, 1);
    if (_mm256_testz_si256(nan16, nan16)) {
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h0));
      _mm256_storeu_ps(d + i + 8, _mm256_cvtph_ps(h1));
    } else {
      _mm256_storeu_ps(d + i, f16_widen8(h0));
      _mm256_storeu_ps(d + i + 8, f16_widen8(h1));
    }
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, f16_widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = half_bits_to_float(s[i]);
}

// f32 -> f16: vcvtps2ph rounds to nearest even (subnormals and overflow to inf as IEEE); NaNs become
// sign | 0x7e00 as in the scalar (the select only for 8 values with a NaN among them).
constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;  // vcvtps2ph's rounding
TANDEM_CVT_AVX2 inline __m128i f16_narrow8(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, kNearestEven);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (_mm256_testz_ps(nan, nan)) return h;
  const __m256i x = _mm256_castps_si256(v);
  const __m256i nan_bits = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x8000)),
                                           _mm256_set1_epi32(0x7e00));
  const __m128i nan16 = pack_low16(_mm256_srli_epi32(_mm256_castps_si256(nan), 16));
  return _mm_blendv_epi8(h, pack_low16(nan_bits), nan16);
}

TANDEM_CVT_AVX2 void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 va = _mm256_loadu_ps(s + i), vb = _mm256_loadu_ps(s + i + 8);
    const __m256 nan = _mm256_cmp_ps(va, vb, _CMP_UNORD_Q);  // one test for the 16, as f32_to_bf16
    __m128i a, b;
    if (_mm256_testz_ps(nan, nan)) {
      a = _mm256_cvtps_ph(va, kNearestEven);
      b = _mm256_cvtps_ph(vb, kNearestEven);
    } else {
      a = f16_narrow8(va);
      b = f16_narrow8(vb);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_set_m128i(b, a));
  }
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), f16_narrow8(_mm256_loadu_ps(s + i)));
  for (; i < n; ++i) d[i] = float_to_half_bits(s[i]);
}

// A loop behind the ConvertLoop signature.
template <class S, class D, void (*F)(const S*, D*, int64_t)>
TANDEM_CVT_AVX2 void loop(const void* src, void* dst, int64_t n) {
  F(static_cast<const S*>(src), static_cast<D*>(dst), n);
}

}  // namespace

const ConvertLoops* convert_avx2_loops() {
  static const ConvertLoops loops{&loop<float, uint16_t, f32_to_f16>, &loop<uint16_t, float, f16_to_f32>,
                                  &loop<float, uint16_t, f32_to_bf16>, &loop<uint16_t, float, bf16_to_f32>};
  return cpu_isa_usable(CpuIsa::avx2) ? &loops : nullptr;
}

}  // namespace tandem
