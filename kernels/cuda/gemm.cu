// GEMM for the CUDA backend: cuBLAS strided-batched GEMM (tensor-op math for f16/bf16, f32
// accumulation) on the device's stream; under the emulator the CPU GEMM stands in for cuBLAS.
#include "kernels/cuda/common.cuh"
#include "runtime/backend/gemm.h"
#ifndef TANDEM_SIMT_EMULATOR
#include "kernels/cuda/cublas_loader.h"
#include "runtime/backend/cuda/check.h"

#include <mutex>
#include <vector>
#endif

namespace tandem::TANDEM_CUDA_NS {
namespace {

void check_args(const kernels::GemmArgs& a) {
  TANDEM_CHECK(a.m >= 0 && a.n >= 0 && a.k >= 0 && a.batch >= 0, "gemm: negative size m={} n={} k={} batch={}",
               a.m, a.n, a.k, a.batch);
  TANDEM_CHECK(is_floating(a.dtype), "gemm does not support dtype {}", dtype_name(a.dtype));
}

#ifdef TANDEM_SIMT_EMULATOR

void gemm(Device device, const kernels::GemmArgs& args) {
  TANDEM_CHECK(device.kind == kKind, "gemm: expected a sim device, got {}", device.str());
  check_args(args);
  kernels::gemm(kCPU)(kCPU, args);  // sim memory is host memory
}

#else

cublasHandle_t handle_for(Device device) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  Stream stream = stream_for(device);  // makes the device current
  std::lock_guard<std::mutex> lock(mutex);
  if (handles.size() <= static_cast<size_t>(device.index)) handles.resize(static_cast<size_t>(device.index) + 1, nullptr);
  cublasHandle_t& h = handles[static_cast<size_t>(device.index)];
  if (!h) {
    CUBLAS_CHECK(cuda::cublas().create(&h));
    CUBLAS_CHECK(cuda::cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH));
  }
  CUBLAS_CHECK(cuda::cublas().set_stream(h, stream));
  return h;
}

void gemm(Device device, const kernels::GemmArgs& a) {
  TANDEM_CHECK(device.kind == kKind, "gemm: expected a cuda device, got {}", device.str());
  check_args(a);
  if (a.m == 0 || a.n == 0 || a.batch == 0) return;
  cublasHandle_t h = handle_for(device);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  cublasOperation_t op_a = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (a.dtype) {
    case DType::f32: type = CUDA_R_32F; break;
    case DType::f16: type = CUDA_R_16F; break;
    case DType::bf16: type = CUDA_R_16BF; break;
    case DType::f64: type = CUDA_R_64F; compute = CUBLAS_COMPUTE_64F; break;
    default: TANDEM_FAIL(NotSupported, "gemm does not support dtype {}", dtype_name(a.dtype));
  }
  const float alpha32 = static_cast<float>(a.alpha), beta32 = static_cast<float>(a.beta);
  const double alpha64 = a.alpha, beta64 = a.beta;
  const void* alpha = a.dtype == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = a.dtype == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;
  CUBLAS_CHECK(cuda::cublas().gemm_strided_batched_ex(
      h, op_b, op_a, static_cast<int>(a.n), static_cast<int>(a.m), static_cast<int>(a.k), alpha, a.b, type,
      static_cast<int>(a.ldb), a.stride_b, a.a, type, static_cast<int>(a.lda), a.stride_a, beta, a.c, type,
      static_cast<int>(a.ldc), a.stride_c, static_cast<int>(a.batch), compute, CUBLAS_GEMM_DEFAULT));
}

#endif

TANDEM_REGISTER_KERNEL(kernels::gemm, kKind, gemm);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
