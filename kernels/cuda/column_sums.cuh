// Column sums of a row-major [rows, cols] array, [tokens, features] -> [features]: bias gradients,
// for sum_to (reduce.cu) and the GEMM epilogues' fallbacks (gemm.cu). Two passes with a split count
// fixed by the shape (reduce.cuh's column_splits), so the sums are the same bits in every run.
#pragma once
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/tensor.h"

namespace tandem::TANDEM_CUDA_NS {

// What sums of T accumulate in: 64-bit integers for integer types (wrapped to T at the end).
template <class T>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, long long, acc_t<T>>;

// The value summed at (row m, column c) of a dense [rows, cols] array: the array's element.
template <class T>
struct ColumnSumOf {
  const T* src;
  int64_t cols;
  __device__ __forceinline__ sum_acc_t<T> operator()(int64_t m, int64_t c) const {
    return static_cast<sum_acc_t<T>>(to_acc(src[m * cols + c]));
  }
};

// dst = scale * sum, or (add) dst plus that: the end of a column sum (both passes make it here).
template <class Out>
__device__ __forceinline__ void finish_sum(sum_acc_t<Out> sum, acc_t<Out> scale, bool add, Out* dst) {
  const acc_t<Out> v = static_cast<acc_t<Out>>(static_cast<acc_t<Out>>(sum) * scale);
  *dst = from_acc<Out>(add ? static_cast<acc_t<Out>>(to_acc(*dst) + v) : v);
}

// Arrival counters of sum_columns_kernel's blocks, one per column group (blockIdx.x): zero between
// launches (a group's last block sets its own back), kept for the process, one array per device
// (reduce.cu). Null where there are more groups than kept, or with TANDEM_COLUMN_SUMS=two-pass
// (A/B runs): the second pass then runs as a kernel of its own.
unsigned* column_arrivals(Device dev, int64_t groups);

// The columns of value(m, c) summed over split blockIdx.y of the rows into part[split * cols + c]:
// a block holds 32 adjacent columns and kColumnRowLanes row lanes, so a warp's loads are coalesced,
// and the partials are split-major, so the second pass's reads are too. Value may also write what
// it read (an elementwise pass fused with the sums: gemm.cu's DGeluColumnSum).
// With `arrivals` the last block of a column group to finish sums the group's partials in split
// order into dst (finish_sum), as sum_splits_to_kernel would in a launch of its own: the same bits,
// one launch and its gap fewer (the second passes were ~70 launches of a few microseconds a GPT-2
// step).
template <class S, class Value, class Out>
__global__ void sum_columns_kernel(Value value, S* __restrict__ part, int64_t rows, int64_t cols, int64_t splits,
                                   unsigned* __restrict__ arrivals, Out* __restrict__ dst, acc_t<Out> scale,
                                   bool add) {
  TANDEM_SHARED(S[kColumnRowLanes][33], lanes);
  TANDEM_SHARED(bool, last);
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const SplitRange r = split_range(rows, blockIdx.y, splits);
  S acc = S(0);
  if (c < cols) {
    // This lane's rows first, first + L, ... below r.end, eight fetched before they are added, in
    // row order (add_in_order). At GPT-2's shapes a lane has ~24 rows at batch 8: three rounds of
    // loads, where four at a time and the rest one by one took up to nine.
    constexpr int64_t L = kColumnRowLanes;
    const int64_t first = r.begin + threadIdx.y, count = r.end > first ? (r.end - first + L - 1) / L : 0;
    acc = add_in_order<8, S>([&](int64_t i) { return value(first + i * L, c); }, count);
  }
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int l = 1; l < kColumnRowLanes; ++l) acc += lanes[l][threadIdx.x];
    part[blockIdx.y * cols + c] = acc;
  }
  if (!arrivals) return;
  __threadfence();  // this block's partials reach L2 before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(arrivals + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other blocks' partials, counted before this arrival, are read after it
  if (threadIdx.y == 0 && c < cols) finish_sum(sum_in_order<S, true>(part + c, splits, cols), scale, add, dst + c);
  if (threadIdx.x == 0 && threadIdx.y == 0) arrivals[blockIdx.x] = 0;  // ready for the next launch
}

// dst[o] = scale * (output o's `splits` partials summed in split order), or (add) dst[o] plus that.
// Output o's partial s is part[o * output_stride + s * split_stride]: split-minor (o * splits + s,
// reduce.cu's and the norms') or split-major (s * outputs + o, the column sums').
template <class T>
__global__ void sum_splits_to_kernel(const sum_acc_t<T>* __restrict__ part, T* __restrict__ dst, int64_t outputs,
                                     int64_t splits, int64_t output_stride, int64_t split_stride, acc_t<T> scale,
                                     bool add) {
  for (int64_t o = global_thread(); o < outputs; o += grid_threads())
    finish_sum(sum_in_order(part + o * output_stride, splits, split_stride), scale, add, dst + o);
}

// dst[c] = scale * sum over r < rows of value(r, c), or (add) dst[c] plus that, on dev's stream
// (rows, cols > 0). The split count depends on the shape alone, so the sums are the same bits
// whatever Value computes them from. Out is the values' dtype (the sums rounded to it), or their
// sums' (acc_t: a 16-bit array's f32 sums unrounded, added to a bias's .grad).
template <class Out, class Value>
void launch_column_sums_of(Device dev, Value value, int64_t rows, int64_t cols, Out* dst,
                           acc_t<Out> scale = acc_t<Out>(1), bool add = false) {
  using S = sum_acc_t<Out>;
  const int64_t splits = column_splits(rows, cols), groups = (cols + 31) / 32;
  Tensor part = Tensor::empty({cols * splits * static_cast<int64_t>(sizeof(S))}, DType::u8, dev);
  unsigned* arrivals = column_arrivals(dev, groups);
  TANDEM_LAUNCH(sum_columns_kernel<S, Value, Out>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(splits)),
                dim3(32, kColumnRowLanes), 0, stream_for(dev), value, static_cast<S*>(part.data_ptr()), rows, cols,
                splits, arrivals, dst, scale, add);
  if (!arrivals)
    TANDEM_LAUNCH(sum_splits_to_kernel<Out>, grid_for(cols, kBlock), kBlock, 0, stream_for(dev),
                  static_cast<const S*>(part.data_ptr()), dst, cols, splits, int64_t(1), cols, scale, add);
}

// dst[c] = scale * sum over r of src[r * cols + c], on dev's stream (rows, cols > 0).
template <class T>
void launch_column_sums(Device dev, const T* src, int64_t rows, int64_t cols, T* dst, acc_t<T> scale = acc_t<T>(1)) {
  launch_column_sums_of(dev, ColumnSumOf<T>{src, cols}, rows, cols, dst, scale);
}

// f(dst as Out*) for the sums of a GEMM epilogue (GemmArgs::a_row_sums, c_col_sums) of T values:
// Out = T, the sums written rounded to it, or (add: GemmArgs::sums_add) acc_t<T>, added to.
template <class T, class F>
void with_epilogue_sums_out(void* dst, bool add, F&& f) {
  if (add) f(static_cast<acc_t<T>*>(dst));
  else f(static_cast<T*>(dst));
}

// The column sums of value over rows into a GEMM epilogue's sums (with_epilogue_sums_out).
template <class T, class Value>
void launch_epilogue_sums(Device dev, Value value, int64_t rows, int64_t cols, void* dst, bool add) {
  with_epilogue_sums_out<T>(dst, add, [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    launch_column_sums_of(dev, value, rows, cols, out, acc_t<Out>(1), add);
  });
}

}  // namespace tandem::TANDEM_CUDA_NS
