// The NCCL transport's device kernels: grid-stride elementwise reduce, divide and 16-bit casts.
#include "runtime/backend/cuda/platform.cuh"

#include <type_traits>

#include "comm/extremum.h"
#include "comm/nccl/nccl_kernels.h"
#include "runtime/backend/common/half.h"

namespace tandem::TANDEM_CUDA_NS::nccl_kernels {

using comm::max_of;
using comm::min_of;
using comm::ReduceOp;

namespace {

constexpr int kBlock = 256;

template <class T>
__global__ void reduce_kernel(T* dst, const T* src, int64_t n, int op) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T a = dst[i], b = src[i];
    dst[i] = op == int(ReduceOp::Max) ? max_of(a, b) : op == int(ReduceOp::Min) ? min_of(a, b) : a + b;
  }
}

template <class T>
__global__ void divide_kernel(T* buf, int64_t n, T divisor) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    buf[i] = buf[i] / divisor;
}

__global__ void widen_kernel(float* dst, const uint16_t* src, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = bf16 ? bf16_bits_to_float(src[i]) : half_bits_to_float(src[i]);
}

__global__ void narrow_kernel(uint16_t* dst, const float* src, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = bf16 ? float_to_bf16_bits(src[i]) : float_to_half_bits(src[i]);
}

template <class T>
constexpr bool kArithmetic = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                             std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

}  // namespace

void reduce(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op, void* stream_ptr) {
  if (n == 0) return;
  const auto stream = static_cast<Stream>(stream_ptr);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kArithmetic<T>)
      TANDEM_LAUNCH(reduce_kernel<T>, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, stream,
                    static_cast<T*>(dst), static_cast<const T*>(src), n, int(op));
    else
      TANDEM_FAIL(NotSupported, "nccl ring reduce on {} (16-bit sums go through f32)", dtype_name(dtype));
  });
}

void divide(void* buf, int64_t n, DType dtype, int divisor, void* stream_ptr) {
  if (n == 0) return;
  const auto stream = static_cast<Stream>(stream_ptr);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kArithmetic<T>)
      TANDEM_LAUNCH(divide_kernel<T>, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, stream,
                    static_cast<T*>(buf), n, static_cast<T>(divisor));
    else
      TANDEM_FAIL(NotSupported, "nccl ring divide on {}", dtype_name(dtype));
  });
}

void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n, void* stream_ptr) {
  if (n == 0) return;
  const auto stream = static_cast<Stream>(stream_ptr);
  if (dst_dtype == DType::f32 && is_low_precision(src_dtype))
    TANDEM_LAUNCH(widen_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, stream, static_cast<float*>(dst),
                  static_cast<const uint16_t*>(src), n, src_dtype == DType::bf16);
  else if (src_dtype == DType::f32 && is_low_precision(dst_dtype))
    TANDEM_LAUNCH(narrow_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, stream, static_cast<uint16_t*>(dst),
                  static_cast<const float*>(src), n, dst_dtype == DType::bf16);
  else
    TANDEM_FAIL(NotSupported, "nccl convert {} -> {}", dtype_name(src_dtype), dtype_name(dst_dtype));
}

}  // namespace tandem::TANDEM_CUDA_NS::nccl_kernels
