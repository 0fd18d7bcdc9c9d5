// lanes_avx2.h's f32 sums (batch norm's and LayerNorm's statistics, the convolution's tiny-K weight
// gradient) against a scalar model of their 16 lanes, bit for bit, at every tail length; their
// 16-bit variants against the f32 ones on the widened values; and that
// lanes.h takes them exactly where AVX-512 is not usable (test_lanes_avx2_avx2 runs it so).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/lanes_avx2.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/tensor.h"

namespace {

namespace avx2 = tandem::kernels::avx2;

// Lane l of 16 adds the terms i = l mod 16 below the last whole 16; the lanes are added 0..15, then
// the tail's terms in order: step(acc, i) adds term i to acc.
template <class Step>
float lanes16(int64_t n, Step step) {
  float lane[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lane[l] = step(lane[l], i + l);
  float s = 0.0f;
  for (float v : lane) s += v;
  for (; i < n; ++i) s = step(s, i);
  return s;
}

std::vector<float> randoms(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 3.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(gen);
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const std::vector<int64_t> kLengths = [] {
  std::vector<int64_t> v;
  for (int64_t n = 0; n <= 49; ++n) v.push_back(n);
  for (int64_t n : {195, 196, 197, 255, 256, 783, 784, 1001}) v.push_back(n);
  return v;
}();

#define SKIP_WITHOUT_AVX2()                           \
  if (!tandem::cpu_isa_usable(tandem::CpuIsa::avx2)) \
  GTEST_SKIP() << "no AVX2 + FMA here (or TANDEM_CPU_ISA=generic)"

TEST(LanesAvx2, SumsMatchTheirLaneModelBitForBit) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : kLengths) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    // An offset of 1: unaligned rows, as a plane inside a tensor.
    const std::vector<float> buf = randoms(n + 1, 7 + static_cast<uint32_t>(n)), dbuf = randoms(n + 1, 99);
    const std::vector<float> wbuf = randoms(n + 1, 5, 0.5f, 1.5f);
    const float *p = buf.data() + 1, *d = dbuf.data() + 1, *w = wbuf.data() + 1;
    const float mu = 0.37f, r = 1.7f;

    EXPECT_TRUE(same_bits(avx2::sum_f32(p, n), lanes16(n, [&](float s, int64_t i) { return s + p[i]; })));
    EXPECT_TRUE(same_bits(avx2::sum_sq_dev_f32(p, n, mu), lanes16(n, [&](float s, int64_t i) {
                            const float t = p[i] - mu;
                            return std::fma(t, t, s);
                          })));
    float a = -1, b = -1;
    avx2::sum_dy_dyxmu_f32(d, p, n, mu, a, b);
    EXPECT_TRUE(same_bits(a, lanes16(n, [&](float s, int64_t i) { return s + d[i]; })));
    EXPECT_TRUE(same_bits(b, lanes16(n, [&](float s, int64_t i) { return std::fma(d[i], p[i] - mu, s); })));
    avx2::sum_g_gxhat_f32(d, w, p, n, mu, r, a, b);
    EXPECT_TRUE(same_bits(a, lanes16(n, [&](float s, int64_t i) { return s + d[i] * w[i]; })));
    EXPECT_TRUE(same_bits(b, lanes16(n, [&](float s, int64_t i) { return std::fma(d[i] * w[i] * (p[i] - mu), r, s); })));
    // And close to the f64 sums (the model above is not the thing being tested twice).
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += double(p[i] - mu) * double(p[i] - mu);
    EXPECT_NEAR(avx2::sum_sq_dev_f32(p, n, mu), e, 1e-5 * (e + 1));
  }
}

// small_k_dots: K rows of cols (ld apart) against dy, added onto dw (and the bias sum onto db), for
// every K up to 16 (whole groups of four and each remainder), with and without the bias.
TEST(LanesAvx2, SmallKDotsMatchTheirLaneModelBitForBit) {
  SKIP_WITHOUT_AVX2();
  for (int64_t L : {1, 7, 15, 16, 17, 33, 196, 785}) {
    const int64_t ld = L + 5;
    const std::vector<float> dy = randoms(L, 3), cols = randoms(16 * ld, 4);
    for (int64_t K = 0; K <= 16; ++K) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "L " << L << " K " << K << " bias " << bias);
        std::vector<float> dw(static_cast<size_t>(K) + 1, 0.25f);  // one past K: never written
        float db = 0.5f;
        avx2::small_k_dots_f32(dy.data(), cols.data(), ld, L, K, dw.data(), bias ? &db : nullptr);
        for (int64_t k = 0; k < K; ++k) {
          const float want = 0.25f + lanes16(L, [&](float s, int64_t q) { return std::fma(dy[q], cols[k * ld + q], s); });
          EXPECT_TRUE(same_bits(dw[size_t(k)], want)) << "k " << k << ": " << dw[size_t(k)] << " vs " << want;
        }
        EXPECT_EQ(dw[size_t(K)], 0.25f);
        const float want_b = bias ? 0.5f + lanes16(L, [&](float s, int64_t q) { return s + dy[q]; }) : 0.5f;
        EXPECT_TRUE(same_bits(db, want_b)) << db << " vs " << want_b;
      }
    }
  }
}

// The 16-bit variants (conv.cpp's 16-bit path) are sum_f32 and small_k_dots_f32 of the widened values.
TEST(LanesAvx2, SixteenBitSumsAndDotsAreThoseOfTheWidenedValues) {
  SKIP_WITHOUT_AVX2();
  for (bool f16 : {true, false}) {
    const tandem::DType dtype = f16 ? tandem::DType::f16 : tandem::DType::bf16;
    auto narrow = [&](const std::vector<float>& v) {  // the 16-bit bits, and their exact widening
      std::vector<uint16_t> bits(v.size());
      tandem::convert_host(v.data(), tandem::DType::f32, bits.data(), dtype, static_cast<int64_t>(v.size()));
      std::vector<float> wide(v.size());
      tandem::convert_host(bits.data(), dtype, wide.data(), tandem::DType::f32, static_cast<int64_t>(v.size()));
      return std::make_pair(bits, wide);
    };
    for (int64_t L : {0, 1, 7, 15, 16, 17, 33, 196, 785}) {
      const int64_t ld = L + 3;
      const auto [dy16, dy] = narrow(randoms(L, 21));
      const auto [cols16, cols] = narrow(randoms(16 * ld, 22));
      SCOPED_TRACE(::testing::Message() << (f16 ? "f16" : "bf16") << " L " << L);
      EXPECT_TRUE(same_bits(avx2::sum_16bit(dy16.data(), L, f16), avx2::sum_f32(dy.data(), L)));
      for (int64_t K : {0, 1, 3, 4, 9, 16}) {
        std::vector<float> dw(static_cast<size_t>(K) + 1, 0.25f), dw16 = dw;
        float db = 0.5f, db16 = 0.5f;
        avx2::small_k_dots_f32(dy.data(), cols.data(), ld, L, K, dw.data(), &db);
        avx2::small_k_dots_16bit(dy16.data(), cols16.data(), ld, L, K, dw16.data(), &db16, f16);
        for (int64_t k = 0; k <= K; ++k)
          EXPECT_TRUE(same_bits(dw16[size_t(k)], dw[size_t(k)])) << "K " << K << " k " << k;
        EXPECT_TRUE(same_bits(db16, db)) << "K " << K;
      }
    }
  }
}

// lanes.h's f32 sums run here exactly where the AVX-512 path is not usable (the AVX2 cap, or a CPU
// without AVX-512); then sum_of and friends return these functions' bits.
TEST(LanesAvx2, LanesHTakesThemWithoutAvx512) {
  const bool want = tandem::cpu_isa_usable(tandem::CpuIsa::avx2) && !tandem::cpu_isa_usable(tandem::CpuIsa::avx512);
  ASSERT_EQ(avx2::lanes_usable(), want);
  if (!want) GTEST_SKIP() << "AVX-512 usable (or no AVX2): lanes.h keeps its 64-byte vectors";
  const std::vector<float> x = randoms(203, 11), dy = randoms(203, 12);
  EXPECT_TRUE(same_bits(tandem::kernels::sum_of<float>(x.data(), 203), avx2::sum_f32(x.data(), 203)));
  EXPECT_TRUE(same_bits(tandem::kernels::sum_sq_dev<float>(x.data(), 203, 0.1f), avx2::sum_sq_dev_f32(x.data(), 203, 0.1f)));
  float a0, b0, a1, b1;
  tandem::kernels::sum_dy_dyxmu<float>(dy.data(), x.data(), 203, 0.2f, a0, b0);
  avx2::sum_dy_dyxmu_f32(dy.data(), x.data(), 203, 0.2f, a1, b1);
  EXPECT_TRUE(same_bits(a0, a1));
  EXPECT_TRUE(same_bits(b0, b1));
}

}  // namespace
