// Division by a divisor fixed at launch, as a multiply-high, an add and a shift (Granlund and
// Montgomery's method for unsigned division by invariant integers). Index math of elementwise
// kernels (permute, expand) divides every element's flat index by each dimension's size: a 64-bit
// division is dozens of instructions on a GPU and made such kernels compute-bound, several times
// off the memory bandwidth. Valid for dividends and divisors below 2^31; callers keep the 64-bit
// path for larger tensors.
#pragma once
#include <cstdint>

#include "runtime/backend/common/host_device.h"

namespace tandem {

struct FastDivmod {
  static constexpr uint32_t kLimit = uint32_t(1) << 31;  // dividends and divisors stay below
  uint32_t divisor = 1, magic = 0, shift = 0;

  FastDivmod() = default;
  // 1 <= d < kLimit. shift = ceil(log2 d); magic = floor(2^32 (2^shift - d) / d) + 1, below 2^32.
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while ((uint64_t(1) << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }
  // n / divisor for n < kLimit (t + n then fits in 32 bits).
  TANDEM_HD_INLINE uint32_t div(uint32_t n) const {
    const uint32_t t = static_cast<uint32_t>((uint64_t(n) * magic) >> 32);
    return (t + n) >> shift;
  }
  TANDEM_HD_INLINE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

// common.cuh's offset_of for a flat index below 2^31, each dim's size a FastDivmod.
TANDEM_HD_INLINE int64_t offset_of(uint32_t i, int rank, const FastDivmod* size, const int64_t* stride) {
  int64_t off = 0;
  uint32_t q = 0, r = 0;
  for (int d = rank - 1; d >= 0; --d) {
    size[d].divmod(i, q, r);
    off += int64_t(r) * stride[d];
    i = q;
  }
  return off;
}

}  // namespace tandem
