// CUDA_CHECK / NCCL_CHECK for the NCCL backend: throw BackendError with the call text, file:line
// and the library's error string.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/error.h"

#define COMM_CUDA_CHECK(call)                                                                 \
  do {                                                                                        \
    cudaError_t comm_cuda_rc_ = (call);                                                       \
    if (comm_cuda_rc_ != cudaSuccess)                                                         \
      ::tandem::throw_call_error(#call, __FILE__, __LINE__, cudaGetErrorString(comm_cuda_rc_)); \
  } while (0)

#define NCCL_CHECK(call)                                                                      \
  do {                                                                                        \
    ncclResult_t comm_nccl_rc_ = (call);                                                      \
    if (comm_nccl_rc_ != ncclSuccess)                                                         \
      ::tandem::throw_call_error(#call, __FILE__, __LINE__, ncclGetErrorString(comm_nccl_rc_)); \
  } while (0)
