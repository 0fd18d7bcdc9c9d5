// Our own warp and block reduction primitives (no CUB): butterfly shuffles within a warp, then one
// value per warp through shared memory. Every lane/thread ends with the result. Blocks must be 1-D
// with blockDim.x a multiple of 32 (<= 1024), and every thread of the block must call in.
#pragma once
#include "kernels/cuda/common.cuh"
#include "runtime/backend/common/welford.h"
#include "runtime/backend/cuda/platform.cuh"

namespace tandem::TANDEM_CUDA_NS {

constexpr unsigned kFullMask = 0xffffffffu;

struct SumOp {
  template <class T>
  __host__ __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {  // NaN wins, so a NaN input shows up in the result
  template <class T>
  __host__ __device__ __forceinline__ T operator()(T a, T b) const { return (a != a || a > b) ? a : b; }
};

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Reduces v over the block; `identity` fills the slots of absent warps. Ends with a barrier, so it
// can be called again right away.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  TANDEM_SHARED(T[32], partial);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  v = warp_reduce(v, op);  // every warp reduces the partials: all threads get the total
  __syncthreads();
  return v;
}

template <class T>
__device__ __forceinline__ T block_sum(T v) { return block_reduce(v, SumOp{}, T(0)); }

// (value, index) pairs: the larger value wins, NaN wins, the lower index wins ties (argmax's
// "first maximum").
template <class T>
struct ArgMax {
  T value;
  long long index;
};
template <class T>
__device__ __forceinline__ ArgMax<T> argmax_combine(ArgMax<T> a, ArgMax<T> b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.index < b.index ? a : b;
    return a_nan ? a : b;
  }
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}
template <class T>
__device__ ArgMax<T> block_argmax(ArgMax<T> v) {
  TANDEM_SHARED(T[32], values);
  TANDEM_SHARED(long long[32], indices);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    v = argmax_combine(v, ArgMax<T>{__shfl_xor_sync(kFullMask, v.value, offset), __shfl_xor_sync(kFullMask, v.index, offset)});
  if (lane == 0) {
    values[warp] = v.value;
    indices[warp] = v.index;
  }
  __syncthreads();
  v = lane < warps ? ArgMax<T>{values[lane], indices[lane]} : ArgMax<T>{T(0), -1};
  for (int offset = 16; offset > 0; offset /= 2)
    v = argmax_combine(v, ArgMax<T>{__shfl_xor_sync(kFullMask, v.value, offset), __shfl_xor_sync(kFullMask, v.index, offset)});
  __syncthreads();
  return v;
}

// Welford states merged with Chan's formula (kernels/common/welford.h) across the block; shuffles
// carry the three fields separately.
template <class S>
__device__ __forceinline__ Welford<S> shfl_xor_welford(const Welford<S>& w, int offset) {
  Welford<S> o;
  o.mean = __shfl_xor_sync(kFullMask, w.mean, offset);
  o.m2 = __shfl_xor_sync(kFullMask, w.m2, offset);
  o.count = __shfl_xor_sync(kFullMask, static_cast<long long>(w.count), offset);
  return o;
}
template <class S>
__device__ Welford<S> block_welford(Welford<S> w) {
  TANDEM_SHARED(S[32], means);
  TANDEM_SHARED(S[32], m2s);
  TANDEM_SHARED(long long[32], counts);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) welford_merge(w, shfl_xor_welford(w, offset));
  if (lane == 0) {
    means[warp] = w.mean;
    m2s[warp] = w.m2;
    counts[warp] = w.count;
  }
  __syncthreads();
  w = Welford<S>{};
  if (lane < warps) {
    w.mean = means[lane];
    w.m2 = m2s[lane];
    w.count = counts[lane];
  }
  for (int offset = 16; offset > 0; offset /= 2) welford_merge(w, shfl_xor_welford(w, offset));
  __syncthreads();
  return w;
}

// ---- two-stage reductions of few outputs over many items (batch-norm channels, bias gradients) ----
// One block per output leaves a GPU nearly idle (32 channels: 32 blocks) and latency-bound. Instead
// each output's items are cut into `splits` contiguous ranges, one block each; a second pass merges
// the partials of an output in split order. The split count depends on the shape alone, so results
// are the same bits on every GPU and in every run.
#ifdef TANDEM_SIMT_EMULATOR
constexpr int64_t kMinItemsPerSplit = 16;  // small test shapes still take several splits
#else
constexpr int64_t kMinItemsPerSplit = 4096;
#endif
inline int64_t reduction_splits(int64_t outputs, int64_t per_output) {
  constexpr int64_t kFillBlocks = 1024;  // ~8 blocks per SM of an H100
  int64_t s = kFillBlocks / (outputs > 0 ? outputs : 1);
  const int64_t by_items = per_output / kMinItemsPerSplit;
  if (s > by_items) s = by_items;
  if (s > kMaxGrid) s = kMaxGrid;
  return s < 1 ? 1 : s;
}
// Column sums of a row-major [rows, cols] array: a block holds 32 adjacent columns and
// kColumnRowLanes row lanes over one split of the rows, so a warp's loads are coalesced (one block
// per column had each warp read 32 rows for 64 useful bytes). Splits as reduction_splits counts
// them, with a block covering 32 outputs and rows / split at least kMinItemsPerSplit / 64.
constexpr int kColumnRowLanes = 8;
inline int64_t column_splits(int64_t rows, int64_t cols) {
  constexpr int64_t kFillBlocks = 1024;
  constexpr int64_t kMinRows = kMinItemsPerSplit / 64 > 0 ? kMinItemsPerSplit / 64 : 1;
  const int64_t col_tiles = (cols + 31) / 32;
  int64_t s = (kFillBlocks + col_tiles - 1) / (col_tiles > 0 ? col_tiles : 1);
  if (s > rows / kMinRows) s = rows / kMinRows;
  if (s > kMaxGrid) s = kMaxGrid;
  return s < 1 ? 1 : s;
}
// Items [begin, end) of split `s` of `splits` over `n` items.
struct SplitRange {
  int64_t begin, end;
};
__host__ __device__ inline SplitRange split_range(int64_t n, int64_t s, int64_t splits) {
  return {n * s / splits, n * (s + 1) / splits};
}
// at(0) + at(1) + ... + at(n - 1), added in that order, the values fetched kBatch at a time before
// they are added (the last n % kBatch too): a loop of dependent adds waits for each load in turn,
// and a loop fetching four at a time left up to three to fetch one by one. The order of the adds,
// so every bit, is the plain loop's; at(i) is called once for each i < n, never beyond.
template <int kBatch, class S, class At>
__device__ __forceinline__ S add_in_order(At at, int64_t n) {
  S acc = S(0);
  int64_t i = 0;
  for (; i + kBatch <= n; i += kBatch) {
    S v[kBatch];
    TANDEM_UNROLL
    for (int u = 0; u < kBatch; ++u) v[u] = at(i + u);
    TANDEM_UNROLL
    for (int u = 0; u < kBatch; ++u) acc += v[u];
  }
  if (i < n) {
    S v[kBatch] = {};
    TANDEM_UNROLL
    for (int u = 0; u < kBatch - 1; ++u)
      if (i + u < n) v[u] = at(i + u);
    TANDEM_UNROLL
    for (int u = 0; u < kBatch - 1; ++u)
      if (i + u < n) acc += v[u];
  }
  return acc;
}

// p[0] + p[stride] + ... + p[(n - 1) * stride] in that order, eight loads in flight (add_in_order):
// the column sums' second pass adds ~43 partials a column, ~6 us on an H200 with one load at a time.
// kFromL2: the values were written by other blocks of the running kernel (a last block's pass): read
// from L2 (__ldcg), never from a stale L1 line or the read-only path.
template <class S, bool kFromL2 = false>
__device__ __forceinline__ S sum_in_order(const S* __restrict__ p, int64_t n, int64_t stride) {
  return add_in_order<8, S>(
      [&](int64_t i) {
        if constexpr (kFromL2) return __ldcg(p + i * stride);
        else return p[i * stride];
      },
      n);
}
// (row, col) of a flat index k = row * cols + col, advanced by a fixed stride with no division in
// the loop (64-bit division costs dozens of instructions per item on a GPU).
struct RowCursor {
  int64_t row = 0, col = 0, step_row = 0, step_col = 0, cols = 1;
  __host__ __device__ RowCursor(int64_t k, int64_t cols_, int64_t stride) {
    if (cols_ <= 0) return;
    cols = cols_;
    row = k / cols;
    col = k % cols;
    step_row = stride / cols;
    step_col = stride % cols;
  }
  __host__ __device__ void advance() {
    row += step_row;
    col += step_col;
    if (col >= cols) {
      col -= cols;
      ++row;
    }
  }
};

}  // namespace tandem::TANDEM_CUDA_NS
