// f16/bf16 rounding and Philox known-answer tests.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/backend/common/half.h"
#include "runtime/backend/common/philox.h"

using namespace tandem;

TEST(Half, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /*min normal*/, 5.960464477539063e-08f /*min subnormal*/})
    EXPECT_EQ(float(half(f)), f) << f;
  EXPECT_EQ(half(1.0f).bits, 0x3c00);
  EXPECT_EQ(half(-2.0f).bits, 0xc000);
  EXPECT_EQ(half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(half(5.960464477539063e-08f).bits, 0x0001);
}

TEST(Half, RoundsToNearestEvenAndOverflows) {
  EXPECT_EQ(half(1.0f + 1.0f / 2048).bits, 0x3c00);          // tie -> even (down)
  EXPECT_EQ(half(1.0f + 3.0f / 2048).bits, 0x3c02);          // tie -> even (up)
  EXPECT_EQ(half(65519.0f).bits, 0x7bff);                     // below the rounding boundary
  EXPECT_EQ(half(65520.0f).bits, 0x7c00);                     // rounds to inf
  EXPECT_EQ(half(1e10f).bits, 0x7c00);
  EXPECT_EQ(half(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(float(half(std::nanf("")))));
  EXPECT_EQ(half(2.9802322387695312e-08f).bits, 0x0000);      // 2^-25: tie -> even zero
  EXPECT_EQ(half(2.99e-08f).bits, 0x0001);                    // just above 2^-25
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float(bfloat16(3.140625f)), 3.140625f);
  EXPECT_EQ(bfloat16(bits_float(0x3f808000u)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(bfloat16(bits_float(0x3f818000u)).bits, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(bfloat16(bits_float(0x3f808001u)).bits, 0x3f81);
  EXPECT_TRUE(std::isnan(float(bfloat16(std::nanf("")))));
}

// Known answers of Philox-4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  Philox4 zero = philox4x32_10(0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  Philox4 ones = philox4x32_10(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  Philox4 pi = philox4x32_10(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(Philox, UniformInUnitInterval) {
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    float u = philox_uniform(7, 3, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}
