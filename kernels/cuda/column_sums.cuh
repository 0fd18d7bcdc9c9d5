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

// The columns of src summed over split blockIdx.y of the rows into part[c * splits + split]: a block
// holds 32 adjacent columns and kColumnRowLanes row lanes, so a warp's loads are coalesced.
template <class T>
__global__ void sum_columns_kernel(const T* __restrict__ src, sum_acc_t<T>* __restrict__ part, int64_t rows,
                                   int64_t cols, int64_t splits) {
  using S = sum_acc_t<T>;
  __shared__ S lanes[kColumnRowLanes][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const SplitRange r = split_range(rows, blockIdx.y, splits);
  S acc = S(0);
  if (c < cols)
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += kColumnRowLanes) acc += static_cast<S>(to_acc(src[m * cols + c]));
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int l = 1; l < kColumnRowLanes; ++l) acc += lanes[l][threadIdx.x];
    part[c * splits + blockIdx.y] = acc;
  }
}

// dst[o] = scale * (the partials of output o summed in split order).
template <class T>
__global__ void sum_splits_to_kernel(const sum_acc_t<T>* __restrict__ part, T* __restrict__ dst, int64_t outputs,
                                     int64_t splits, acc_t<T> scale) {
  for (int64_t o = global_thread(); o < outputs; o += grid_threads())
    dst[o] = from_acc<T>(static_cast<acc_t<T>>(static_cast<acc_t<T>>(sum_of_splits(part, o, splits)) * scale));
}

// dst[c] = scale * sum over r of src[r * cols + c], on dev's stream (rows, cols > 0).
template <class T>
void launch_column_sums(Device dev, const T* src, int64_t rows, int64_t cols, T* dst, acc_t<T> scale = acc_t<T>(1)) {
  using S = sum_acc_t<T>;
  const int64_t splits = column_splits(rows, cols);
  Tensor part = Tensor::empty({cols * splits * static_cast<int64_t>(sizeof(S))}, DType::u8, dev);
  TANDEM_LAUNCH(sum_columns_kernel<T>, dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(splits)),
                dim3(32, kColumnRowLanes), 0, stream_for(dev), src, static_cast<S*>(part.data_ptr()), rows, cols,
                splits);
  TANDEM_LAUNCH(sum_splits_to_kernel<T>, grid_for(cols, kBlock), kBlock, 0, stream_for(dev),
                static_cast<const S*>(part.data_ptr()), dst, cols, splits, scale);
}

}  // namespace tandem::TANDEM_CUDA_NS
