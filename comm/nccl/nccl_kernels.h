// Device-side memory operations of the NCCL transport (reduce, divide, f16/bf16 <-> f32), launched
// on the transport's stream. Defined in nccl_kernels.cu, which is built twice as the kernels/cuda
// sources are: by nvcc into tandem::cuda (the NCCL transport, TANDEM_CUDA=ON) and by g++ against
// the SIMT emulator into tandem::sim (tandem_cuda_sim: tests/cuda/test_ops_nccl_kernels.cpp).
// `stream` is the build's stream (cudaStream_t), passed opaquely so that this header needs no CUDA.
#pragma once
#include <cstdint>

#include "comm/communicator.h"

#define TANDEM_NCCL_KERNELS_DECLARE                                                                      \
  void reduce(void* dst, const void* src, int64_t n, DType dtype, comm::ReduceOp op, void* stream);    \
  void divide(void* buf, int64_t n, DType dtype, int divisor, void* stream);                           \
  /* f16/bf16 <-> f32 only (the ring's wide accumulation); other pairs throw NotSupportedError. */     \
  void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n, void* stream);

namespace tandem::cuda::nccl_kernels {
TANDEM_NCCL_KERNELS_DECLARE
}  // namespace tandem::cuda::nccl_kernels

namespace tandem::sim::nccl_kernels {
TANDEM_NCCL_KERNELS_DECLARE
}  // namespace tandem::sim::nccl_kernels

#undef TANDEM_NCCL_KERNELS_DECLARE
