// Welford / Chan merge of (count, mean, M2) partial statistics, shared by the CPU and CUDA batch-norm
// kernels and by SyncBatchNorm, which merges the per-rank statistics after an all-gather.
#pragma once
#include <cstdint>

#include "runtime/backend/common/host_device.h"

namespace tandem {

// Running statistics of a set of values: count, mean and M2 = sum((v - mean)^2).
template <class T>
struct Welford {
  T mean = T(0);
  T m2 = T(0);
  int64_t count = 0;
};

// Adds one value (Welford's update).
template <class T>
TANDEM_HD inline void welford_add(Welford<T>& a, T v) {
  a.count += 1;
  T delta = v - a.mean;
  a.mean += delta / static_cast<T>(a.count);
  a.m2 += delta * (v - a.mean);
}

// Merges b into a (Chan et al.): exact for any split of the data; empty sides are no-ops.
template <class T>
TANDEM_HD inline void welford_merge(Welford<T>& a, const Welford<T>& b) {
  if (b.count == 0) return;
  if (a.count == 0) {
    a = b;
    return;
  }
  int64_t n = a.count + b.count;
  T nb_over_n = static_cast<T>(b.count) / static_cast<T>(n);
  T delta = b.mean - a.mean;
  a.mean += delta * nb_over_n;
  a.m2 += b.m2 + delta * delta * static_cast<T>(a.count) * nb_over_n;
  a.count = n;
}

}  // namespace tandem
