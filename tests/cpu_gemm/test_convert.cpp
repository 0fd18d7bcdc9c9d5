// convert_host's AVX-512 f32 <-> f16/bf16 loops (and the AVX2 + F16C ones, in the _avx2 run) against
// half.h's scalar conversions, bit for bit: every 16-bit pattern widened, and f32 patterns across the
// whole range (ties, subnormals, overflow, NaN payloads, signs) narrowed, with lengths that leave tails.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/backend/common/half.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/convert_avx2.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {

std::vector<uint32_t> f32_patterns() {
  std::vector<uint32_t> out;
  for (uint64_t x = 0; x < (uint64_t(1) << 32); x += 4093) out.push_back(static_cast<uint32_t>(x));  // everywhere
  for (uint32_t i = 0; i < (1u << 19); ++i) out.push_back((i << 13) | 0x1000u);  // f16 ties (normal range)
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    out.push_back((i << 16) | 0x8000u);  // bf16 ties
    out.push_back((i << 16) | 0x7fffu);
  }
  for (uint32_t e = 0x33000000u; e < 0x38800000u; e += 0x1357u) out.push_back(e);  // f16 subnormal results
  out.push_back(0x7f800001u);  // a signalling NaN
  out.push_back(0xffc12345u);
  out.push_back(0x477ff000u);  // 65520: rounds to inf in f16
  out.push_back(0x477fefffu);
  out.pop_back();  // odd length: the last 16 leave a masked tail
  return out;
}

}  // namespace

TEST(ConvertHost, Widening16BitMatchesScalarForEveryPattern) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  std::vector<float> dst(src.size());
  for (DType t : {DType::f16, DType::bf16}) {
    convert_host(src.data(), t, dst.data(), DType::f32, static_cast<int64_t>(src.size()));
    for (size_t i = 0; i < src.size(); ++i) {
      const float want = t == DType::f16 ? half_bits_to_float(src[i]) : bf16_bits_to_float(src[i]);
      ASSERT_EQ(float_bits(dst[i]), float_bits(want)) << dtype_name(t) << " pattern " << src[i];
    }
  }
}

TEST(ConvertHost, NarrowingF32MatchesScalar) {
  const std::vector<uint32_t> bits = f32_patterns();
  std::vector<float> src(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) src[i] = bits_float(bits[i]);
  std::vector<uint16_t> dst(bits.size());
  for (DType t : {DType::f16, DType::bf16}) {
    convert_host(src.data(), DType::f32, dst.data(), t, static_cast<int64_t>(src.size()));
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint16_t want = t == DType::f16 ? float_to_half_bits(src[i]) : float_to_bf16_bits(src[i]);
      ASSERT_EQ(dst[i], want) << dtype_name(t) << " f32 bits 0x" << std::hex << bits[i];
    }
  }
}

// Which loops ran: under TANDEM_CPU_ISA=avx2 the AVX2 + F16C ones, where the CPU has them.
TEST(ConvertHost, Avx2LoopsTakenWhereUsable) {
  float f[9] = {1.5f, -2.f, 0.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f};
  uint16_t h[9] = {};
  const ConvertLoops* loops = convert_avx2_loops();
  EXPECT_EQ(loops != nullptr, cpu_isa_usable(CpuIsa::avx2));
  if (loops) {
    EXPECT_EQ(loop_for(*loops, DType::f32, DType::f64), nullptr);  // not a 16-bit pair: no loop
    const ConvertLoop to_f16 = loop_for(*loops, DType::f32, DType::f16);
    ASSERT_NE(to_f16, nullptr);
    to_f16(f, h, 9);
    for (int i = 0; i < 9; ++i) EXPECT_EQ(h[i], float_to_half_bits(f[i]));
  }
}

// Every length up to 40 (the 16-value steps, the 8-value step and the scalar tail), a NaN now in one
// step and now in none: the scalar's bits, and nothing written past n.
TEST(ConvertHost, EveryLengthMatchesScalarAndWritesNothingPastIt) {
  const float qnan = bits_float(0x7fc00123u), snan = bits_float(0xff800005u);
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> f(static_cast<size_t>(n) + 1);
    for (int64_t i = 0; i < n; ++i) f[size_t(i)] = 0.3f * static_cast<float>(i) - 5.0f + 1e-3f;
    if (n > 3) f[size_t(n / 3)] = (n % 2) ? qnan : snan;
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " n " << n);
      std::vector<uint16_t> h(static_cast<size_t>(n) + 1, 0xabcd);
      convert_host(f.data(), DType::f32, h.data(), t, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(h[size_t(i)], t == DType::f16 ? float_to_half_bits(f[size_t(i)]) : float_to_bf16_bits(f[size_t(i)]));
      EXPECT_EQ(h[size_t(n)], 0xabcd);
      std::vector<float> back(static_cast<size_t>(n) + 1, -9.0f);
      convert_host(h.data(), t, back.data(), DType::f32, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(float_bits(back[size_t(i)]),
                  float_bits(t == DType::f16 ? half_bits_to_float(h[size_t(i)]) : bf16_bits_to_float(h[size_t(i)])));
      EXPECT_EQ(back[size_t(n)], -9.0f);
    }
  }
}

// One NaN (quiet or signalling, either sign) at each position of three 16-value steps, the rest
// finite: the 16-value loops test for NaNs once a step, so a fix-up applied to the wrong half of a
// step, or skipped, shows here as the scalar's NaN bits missing or a finite value rewritten. 47 and
// 45 values end in an 8-value step and a scalar tail of 7 and 5.
TEST(ConvertHost, OneNaNAtEveryPositionOfASixteenStep) {
  for (const int64_t n : {int64_t(48), int64_t(47), int64_t(45)}) {
    for (int64_t p = 0; p < n; ++p) {
      for (const uint32_t nan_bits : {0x7fc00123u, 0xff800005u, 0x7f800001u, 0xffc7e001u}) {
        std::vector<float> f(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) f[size_t(i)] = 0.37f * static_cast<float>(i) - 7.0f + 1e-3f;
        f[size_t(p)] = bits_float(nan_bits);
        for (DType t : {DType::f16, DType::bf16}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(t) << " n " << n << " NaN 0x" << std::hex << nan_bits
                                            << std::dec << " at " << p);
          std::vector<uint16_t> h(static_cast<size_t>(n));
          convert_host(f.data(), DType::f32, h.data(), t, n);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(h[size_t(i)], t == DType::f16 ? float_to_half_bits(f[size_t(i)]) : float_to_bf16_bits(f[size_t(i)]))
                << "at " << i;
          // Widening: a 16-bit signalling NaN (payload kept by the scalar, quieted by vcvtph2ps) at p.
          if (t == DType::f16) h[size_t(p)] = static_cast<uint16_t>(0x7c01u | ((nan_bits >> 16) & 0x8000u));
          std::vector<float> back(static_cast<size_t>(n));
          convert_host(h.data(), t, back.data(), DType::f32, n);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(float_bits(back[size_t(i)]),
                      float_bits(t == DType::f16 ? half_bits_to_float(h[size_t(i)]) : bf16_bits_to_float(h[size_t(i)])))
                << "at " << i;
        }
      }
    }
  }
}
