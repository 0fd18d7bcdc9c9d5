// AVX2 + F16C f32 <-> f16/bf16 conversion loops, 8 elements per step and the scalar conversions for
// the last n % 8 (the same bits: the loops are written to equal them); the functions with intrinsics
// carry a target attribute and internal linkage, so a CPU without AVX2/F16C never runs them. Without
// them an f16 GEMM or autocast cast converted element by element: the cnn under --amp f16 ran at 0.29x
// its fp32 speed on the AVX2 path (docs/cpu-kernels.md).
#include "runtime/convert_avx2.h"

#include <immintrin.h>

#include "runtime/backend/common/half.h"
#include "runtime/backend/cpu_isa.h"

#define TANDEM_CVT_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tandem {
namespace {

// bf16 -> f32: the bits in the upper half.
TANDEM_CVT_AVX2 void bf16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
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
TANDEM_CVT_AVX2 void f32_to_bf16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    const __m256i x = _mm256_castps_si256(v), hi = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i out = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16(out));
  }
  for (; i < n; ++i) d[i] = float_to_bf16_bits(s[i]);
}

// f16 -> f32: vcvtph2ps is exact; only NaNs differ (it quiets them; the scalar keeps the payload).
TANDEM_CVT_AVX2 void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7c00), man_mask = _mm256_set1_epi32(0x3ff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i is_inf_nan = _mm256_cmpeq_epi32(_mm256_and_si256(w, exp_mask), exp_mask);
    const __m256i man_zero = _mm256_cmpeq_epi32(_mm256_and_si256(w, man_mask), _mm256_setzero_si256());
    const __m256i nan = _mm256_andnot_si256(man_zero, is_inf_nan);
    const __m256i nan_bits = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                        _mm256_set1_epi32(0x7f800000)),
        _mm256_slli_epi32(_mm256_and_si256(w, man_mask), 13));
    const __m256i f = _mm256_blendv_epi8(_mm256_castps_si256(_mm256_cvtph_ps(h)), nan_bits, nan);
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(f));
  }
  for (; i < n; ++i) d[i] = half_bits_to_float(s[i]);
}

// f32 -> f16: vcvtps2ph rounds to nearest even (subnormals and overflow to inf as IEEE); NaNs become
// sign | 0x7e00 as in the scalar.
TANDEM_CVT_AVX2 void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i x = _mm256_castps_si256(v);
    const __m256i nan_bits = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x8000)),
                                             _mm256_set1_epi32(0x7e00));
    const __m128i nan = pack_low16(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)), 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_blendv_epi8(h, pack_low16(nan_bits), nan));
  }
  for (; i < n; ++i) d[i] = float_to_half_bits(s[i]);
}

}  // namespace

bool convert_avx2(const void* src, DType s, void* dst, DType d, int64_t n) {
  if (!cpu_isa_usable(CpuIsa::avx2)) return false;  // AVX2, FMA, F16C and the cap
  if (s == DType::bf16 && d == DType::f32) bf16_to_f32(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
  else if (s == DType::f32 && d == DType::bf16) f32_to_bf16(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  else if (s == DType::f16 && d == DType::f32) f16_to_f32(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
  else if (s == DType::f32 && d == DType::f16) f32_to_f16(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  else return false;
  return true;
}

}  // namespace tandem
