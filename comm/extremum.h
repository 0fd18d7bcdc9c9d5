// Max and Min of two elements for the collectives, the same for the host transports and the NCCL
// transport's reduce kernel.
#pragma once
#include <cmath>
#include <type_traits>

#include "runtime/backend/common/host_device.h"

namespace tandem::comm {

// Symmetric in a and b, bit for bit, so that every rank reduces to the same bits in whatever order
// partial results meet: recursive doubling combines (mine, theirs) on one side of a pair and
// (theirs, mine) on the other, and `b > a ? b : a` alone keeps a NaN on one side and drops it on the
// other, and keeps whichever zero came first. Here a NaN wins (as in torch.max), as one canonical
// NaN, and Max takes +0 over -0 (Min -0 over +0).
template <class T>
TANDEM_HD_INLINE T max_of(T a, T b) {
  if constexpr (!std::is_integral_v<T>) {
    if (a != a || b != b) return static_cast<T>(NAN);
    if (a == b) return std::signbit(a) ? b : a;
  }
  return b > a ? b : a;
}

template <class T>
TANDEM_HD_INLINE T min_of(T a, T b) {
  if constexpr (!std::is_integral_v<T>) {
    if (a != a || b != b) return static_cast<T>(NAN);
    if (a == b) return std::signbit(a) ? a : b;
  }
  return b < a ? b : a;
}

}  // namespace tandem::comm
