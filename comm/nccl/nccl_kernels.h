// Device-side memory operations of the NCCL transport (reduce, divide, f16/bf16 <-> f32), launched
// on the transport's stream. Defined in nccl_kernels.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "comm/communicator.h"

namespace tandem::comm::nccl_kernels {

void reduce(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op, cudaStream_t stream);
void divide(void* buf, int64_t n, DType dtype, int divisor, cudaStream_t stream);
// f16/bf16 <-> f32 only (the ring's wide accumulation); other pairs throw NotSupportedError.
void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n, cudaStream_t stream);

}  // namespace tandem::comm::nccl_kernels
