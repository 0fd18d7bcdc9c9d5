// FastDivmod (the permute and expand kernels' index math) against the / and % operators: every small
// divisor, powers of two and their neighbours, random divisors up to 2^31 - 1, each with small,
// boundary and random dividends below 2^31.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/fast_divmod.h"

namespace tandem::testing {
namespace {

TEST(FastDivmod, MatchesIntegerDivisionBelowTwoToThe31) {
  constexpr uint32_t kLimit = FastDivmod::kLimit;
  std::mt19937_64 rng(7);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 3000; ++d) divisors.push_back(d);
  for (int b = 1; b < 31; ++b) {
    const uint32_t p = uint32_t(1) << b;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  divisors.push_back(kLimit - 1);
  for (int i = 0; i < 1000; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % (kLimit - 1)));
  int64_t wrong = 0;
  for (uint32_t d : divisors) {
    const FastDivmod f(d);
    std::vector<uint32_t> dividends{0, 1, d - 1, d, kLimit - 1, kLimit - 2};
    if (d < kLimit / 3) dividends.insert(dividends.end(), {2 * d - 1, 2 * d, 3 * d - 1});
    for (uint32_t n = 0; n < 1000; ++n) dividends.push_back(n);
    for (int i = 0; i < 200; ++i) dividends.push_back(static_cast<uint32_t>(rng() % kLimit));
    for (uint32_t n : dividends) {
      uint32_t q = 0, r = 0;
      f.divmod(n, q, r);
      if (q != n / d || r != n % d) {
        if (++wrong <= 5) ADD_FAILURE() << n << " / " << d << ": " << q << " rem " << r;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tandem::testing
