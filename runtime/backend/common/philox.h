// Philox-4x32-10 (Salmon et al., SC'11): a counter-based RNG, so the CPU and CUDA backends draw the
// same numbers for the same (seed, offset) no matter how the work is split across threads.
// tandem's convention: element i of a draw with (seed, offset) takes word i % 4 of the block
// philox(key = seed, counter = {i / 4 (64 bits), offset (64 bits)}).
#pragma once
#include <cstdint>

#include "runtime/backend/common/host_device.h"

namespace tandem {

struct Philox4 {
  uint32_t v[4];
};

TANDEM_HD inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

TANDEM_HD inline Philox4 philox4x32_10(uint64_t seed, uint64_t block, uint64_t offset) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(offset), c3 = static_cast<uint32_t>(offset >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
  }
  return {{c0, c1, c2, c3}};
}

// The raw 32-bit word for element i.
TANDEM_HD inline uint32_t philox_word(uint64_t seed, uint64_t offset, uint64_t i) {
  return philox4x32_10(seed, i / 4, offset).v[i % 4];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
TANDEM_HD inline float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  return static_cast<float>(philox_word(seed, offset, i) >> 8) * (1.0f / 16777216.0f);
}

}  // namespace tandem
