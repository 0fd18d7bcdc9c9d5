// f16 and bf16 storage types with bit-exact round-to-nearest-even conversions, shared by the CPU
// backend, the CUDA kernels and the SIMT emulator so every backend rounds the same way.
#pragma once
#include <cstdint>
#include <cstring>

#include "runtime/backend/common/host_device.h"

namespace tandem {

TANDEM_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
TANDEM_HD inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// IEEE binary16, round to nearest even; overflow to inf, NaN stays NaN (quiet).
TANDEM_HD inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) return uint16_t(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (mag >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // >= 2^16: inf
  if (mag < 0x33000000u) return uint16_t(sign);             // <= 2^-25 rounds to zero
  if (mag < 0x38800000u) {                                  // half subnormal: units of 2^-24
    uint32_t e = mag >> 23;
    uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // 14..24
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t h = (mag - (112u << 23)) >> 13;  // rebias exponent, keep 10 mantissa bits
  uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may round up to inf: correct
  return uint16_t(sign | h);
}

TANDEM_HD inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    e = 113;  // normalise the subnormal
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    m &= 0x3ffu;
    return bits_float(sign | (e << 23) | (m << 13));
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16: the top half of an f32, round to nearest even; NaN stays NaN.
TANDEM_HD inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}
TANDEM_HD inline float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

struct half {
  uint16_t bits = 0;
  half() = default;
  TANDEM_HD explicit half(float f) : bits(float_to_half_bits(f)) {}
  TANDEM_HD operator float() const { return half_bits_to_float(bits); }
  TANDEM_HD static half from_bits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  TANDEM_HD explicit bfloat16(float f) : bits(float_to_bf16_bits(f)) {}
  TANDEM_HD operator float() const { return bf16_bits_to_float(bits); }
  TANDEM_HD static bfloat16 from_bits(uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};

}  // namespace tandem
