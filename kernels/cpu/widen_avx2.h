// AVX2 + F16C reads of f32, f16 and bf16 values as f32, shared by the AVX2 GEMM's packing
// (gemm_avx2_kernels.h) and the lane sums (lanes_avx2.cpp), so both widen as convert_host does. The
// functions carry a target attribute and have internal linkage: nothing here runs on a CPU without
// AVX2, FMA and F16C, whatever -march the build uses.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "runtime/backend/common/half.h"

#define TANDEM_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TANDEM_AVX2_INLINE TANDEM_AVX2 inline __attribute__((always_inline))

namespace tandem::kernels::avx2 {
namespace {

// The element types read: f32, or f16 / bf16 values widened as they are read (F16C's vcvtph2ps; bf16
// by a 16-bit shift), the values of convert_host's widening (NaN payloads aside: vcvtph2ps quiets a
// signalling NaN, which a product turns into a NaN anyway).
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
TANDEM_AVX2_INLINE __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
TANDEM_AVX2_INLINE __m256 load8(const F16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
TANDEM_AVX2_INLINE __m256 load8(const BF16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float to_f32(float v) { return v; }
inline float to_f32(F16 v) { return half_bits_to_float(v.bits); }
inline float to_f32(BF16 v) { return bf16_bits_to_float(v.bits); }
// to_f32 in target code (the packing's tails, the sums' tails): F16C's scalar vcvtph2ps for f16, as
// load8's lanes (the software conversion was a fifth of an f16 panel's packing where K or the
// panel's width is not a multiple of 8).
template <class S>
TANDEM_AVX2_INLINE float widen1(S v) {
  if constexpr (std::is_same_v<S, F16>)
    return _cvtsh_ss(v.bits);
  else
    return to_f32(v);
}

}  // namespace
}  // namespace tandem::kernels::avx2
