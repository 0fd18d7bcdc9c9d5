// Helpers of the CPU kernels: the OpenMP size threshold, per-thread scratch, prefetching, and
// vectorised sums. A plain `s += f(i)` loop is a serial dependency chain that
// the compiler may not reorder (no -ffast-math), and `omp simd reduction` is not applied reliably
// inside templates; so the partial sums live in an explicit 64-byte vector (GCC/Clang vector
// extension): lane l adds f(i) for i = l mod W, then the lanes and the tail are added in a fixed
// order. The result depends only on n and the data, never on the thread count or the run.
#pragma once
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "kernels/cpu/lanes_avx2.h"

namespace tandem::kernels {

// 64-byte aligned storage for thread_scratch. Eigen's vectorised loops take a row's elements before
// its first aligned packet one by one (its scalar exp's bits differ from the packet exp's; its sum()
// adds in an order that follows the alignment), so a buffer's alignment must not depend on the
// allocator's history: a resumed run must compute the bits of the run that never stopped.
template <class T>
struct Aligned64Allocator {
  using value_type = T;
  Aligned64Allocator() = default;
  template <class U>
  Aligned64Allocator(const Aligned64Allocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const Aligned64Allocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const Aligned64Allocator<U>&) const { return false; }
};

// Per-thread scratch buffers that only grow, reused by every call (so a kernel's working buffer is
// not page-faulted in again at each step, and is often still in cache), 64-byte aligned. One slot
// per use (and element type); a kernel must not hand its slot's pointer to code that takes the same
// slot.
enum class Scratch {
  ConvColumns, ConvPixels, NormPlane, NormChannel,
  // conv.cpp's f16/bf16 chunks widened to f32 (input, gradient) and its f32 results before rounding
  ConvChunkIn, ConvChunkGrad, ConvChunkOut,
  // batch_norm.cpp: a 16-bit x's channel widened to f32, a 16-bit dx's plane before rounding
  NormWiden, NormGradPlane,
  // attention_bf16.cpp: scores / probabilities, their gradients, a block's output rows, dK, dV,
  // and per-row delta, max and sum
  AttnScores, AttnScoresGrad, AttnRows, AttnKeyGrad, AttnValueGrad, AttnDelta, AttnMax, AttnSum,
  kCount
};
template <class T>
inline T* thread_scratch(Scratch slot, int64_t n) {
  static thread_local std::vector<T, Aligned64Allocator<T>> bufs[static_cast<int>(Scratch::kCount)];
  auto& b = bufs[static_cast<int>(slot)];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Asks for the cache lines of p[0, n) (for writing when for_write). For loops that hop between short
// runs far apart (one plane of a channel after another), which the hardware prefetcher does not follow.
template <class T>
inline void prefetch_lines(const T* p, int64_t n, bool for_write = false) {
  const char* b = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  for (int64_t off = 0; off < bytes; off += 64) {
    if (for_write)
      __builtin_prefetch(b + off, 1);
    else
      __builtin_prefetch(b + off, 0);
  }
}

// OpenMP loops run on one thread below this many elements of work: a parallel region costs more
// than small tensors take (and much more when the cores are oversubscribed).
constexpr int64_t kParallelMinWork = int64_t(1) << 15;

template <class S>
struct SumVec {
  static constexpr int kWidth = 64 / static_cast<int>(sizeof(S));
  typedef S type __attribute__((vector_size(64)));
};

// sum over i in [0, n) of f(i), in S (float or double).
template <class S, class F>
inline S lane_sum(int64_t n, F&& f) {
  using V = typename SumVec<S>::type;
  constexpr int W = SumVec<S>::kWidth;
  V acc = {};
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    S t[W];  // filled by a fixed-length loop (vectorised as a whole), then moved into a register
    for (int l = 0; l < W; ++l) t[l] = f(i + l);
    V v;
    std::memcpy(&v, t, sizeof v);
    acc += v;
  }
  S s = S(0);
  for (int l = 0; l < W; ++l) s += acc[l];
  for (; i < n; ++i) s += f(i);
  return s;
}

// Two sums in one pass: a = sum fa(i), b = sum fb(i).
template <class S, class FA, class FB>
inline void lane_sum2(int64_t n, FA&& fa, FB&& fb, S& a, S& b) {
  using V = typename SumVec<S>::type;
  constexpr int W = SumVec<S>::kWidth;
  V acc_a = {}, acc_b = {};
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    S ta[W], tb[W];
    for (int l = 0; l < W; ++l) {
      ta[l] = fa(i + l);
      tb[l] = fb(i + l);
    }
    V va, vb;
    std::memcpy(&va, ta, sizeof va);
    std::memcpy(&vb, tb, sizeof vb);
    acc_a += va;
    acc_b += vb;
  }
  a = S(0);
  b = S(0);
  for (int l = 0; l < W; ++l) {
    a += acc_a[l];
    b += acc_b[l];
  }
  for (; i < n; ++i) {
    a += fa(i);
    b += fb(i);
  }
}

}  // namespace tandem::kernels

namespace tandem::kernels {

// Contiguous-array sums with explicit 64-byte vector loads (the generic lane_sum above leaves the
// gathering of f(i) to the compiler, which builds vectors element by element). T == S only; other
// element types (f16/bf16 into f32) take the generic path. f32 without AVX-512 (lanes_avx2.h): the
// same lanes in two ymm registers, since a build for AVX2 spills these 64-byte vectors.
template <class S>
inline typename SumVec<S>::type vload(const S* p) {
  typename SumVec<S>::type v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class S>
inline S hsum(const typename SumVec<S>::type& v) {
  S s = S(0);
  for (int l = 0; l < SumVec<S>::kWidth; ++l) s += v[l];
  return s;
}

// sum(p[i])
template <class S, class T>
inline S sum_of(const T* p, int64_t n) {
  if constexpr (std::is_same_v<S, T>) {
    if constexpr (std::is_same_v<S, float>)
      if (avx2::lanes_usable()) return avx2::sum_f32(p, n);
    constexpr int W = SumVec<S>::kWidth;
    typename SumVec<S>::type acc = {};
    int64_t i = 0;
    for (; i + W <= n; i += W) acc += vload(p + i);
    S s = hsum<S>(acc);
    for (; i < n; ++i) s += p[i];
    return s;
  } else {
    return lane_sum<S>(n, [&](int64_t i) { return static_cast<S>(p[i]); });
  }
}

// sum((p[i] - mu)^2)
template <class S, class T>
inline S sum_sq_dev(const T* p, int64_t n, S mu) {
  if constexpr (std::is_same_v<S, T>) {
    if constexpr (std::is_same_v<S, float>)
      if (avx2::lanes_usable()) return avx2::sum_sq_dev_f32(p, n, mu);
    constexpr int W = SumVec<S>::kWidth;
    typename SumVec<S>::type acc = {}, m = {};
    m += mu;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const auto d = vload(p + i) - m;
      acc += d * d;
    }
    S s = hsum<S>(acc);
    for (; i < n; ++i) s += (p[i] - mu) * (p[i] - mu);
    return s;
  } else {
    return lane_sum<S>(n, [&](int64_t i) {
      const S d = static_cast<S>(p[i]) - mu;
      return d * d;
    });
  }
}

// a = sum(dy[i]), b = sum(dy[i] * (x[i] - m))
template <class S, class T>
inline void sum_dy_dyxmu(const T* dy, const T* x, int64_t n, S m, S& a, S& b) {
  if constexpr (std::is_same_v<S, T>) {
    if constexpr (std::is_same_v<S, float>)
      if (avx2::lanes_usable()) return avx2::sum_dy_dyxmu_f32(dy, x, n, m, a, b);
    constexpr int W = SumVec<S>::kWidth;
    typename SumVec<S>::type aa = {}, bb = {}, mv = {};
    mv += m;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const auto d = vload(dy + i);
      aa += d;
      bb += d * (vload(x + i) - mv);
    }
    a = hsum<S>(aa);
    b = hsum<S>(bb);
    for (; i < n; ++i) {
      a += dy[i];
      b += dy[i] * (x[i] - m);
    }
  } else {
    lane_sum2<S>(
        n, [&](int64_t i) { return static_cast<S>(dy[i]); },
        [&](int64_t i) { return static_cast<S>(dy[i]) * (static_cast<S>(x[i]) - m); }, a, b);
  }
}

}  // namespace tandem::kernels
