// The check macros of the CUDA-side libraries, for every CUDA plug-in (kernels/cuda, comm/nccl):
//   CUDA_CHECK(cudaMemcpyAsync(...));  CUBLAS_CHECK(...);  CUDNN_CHECK(...);  NCCL_CHECK(...);
// A failed call throws BackendError "<file>:<line>: <call> failed: <library's message> (on cuda:<n>)",
// n being the device current on the calling thread. A macro names its library's types only where it
// is used, so a file includes the library headers it calls and this one.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "runtime/error.h"

namespace tandem::cuda_check {

// " (on cuda:<n>)" for the calling thread's current device; asking must not itself fail the report.
inline std::string on_device() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next call
    return " (no current CUDA device)";
  }
  return " (on cuda:" + std::to_string(device) + ")";
}

[[noreturn]] inline void fail(const char* call, const char* file, int line, const char* library_message) {
  throw_call_error(call, file, line, std::string(library_message) + on_device());
}

}  // namespace tandem::cuda_check

// One checker: `call` yields a Type whose success value is `ok`; `message(status)` is the library's text.
#define TANDEM_LIBRARY_CHECK(Type, ok, message, call)                                 \
  do {                                                                                \
    const Type tandem_status_ = (call);                                               \
    if (tandem_status_ != (ok))                                                       \
      ::tandem::cuda_check::fail(#call, __FILE__, __LINE__, message(tandem_status_)); \
  } while (0)

#define CUDA_CHECK(call) TANDEM_LIBRARY_CHECK(cudaError_t, cudaSuccess, cudaGetErrorString, call)
// cuBLAS is opened at run time (kernels/cuda/cublas_loader.h), its status text with it.
#define CUBLAS_CHECK(call) \
  TANDEM_LIBRARY_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, ::tandem::cuda::cublas().status_string, call)
#define CUDNN_CHECK(call) TANDEM_LIBRARY_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString, call)
#define NCCL_CHECK(call) TANDEM_LIBRARY_CHECK(ncclResult_t, ncclSuccess, ncclGetErrorString, call)
