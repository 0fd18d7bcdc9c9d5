// Matrix products through the backend's GEMM (Eigen on CPU, cuBLAS on CUDA).
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

// [M, K] @ [K, N] -> [M, N]; [B, M, K] @ [B, K, N] -> [B, M, N]; [B, M, K] @ [K, N] -> [B, M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] , weight [out, in], bias [out] (optional) -> [..., out]   (y = x W^T + b)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tandem::ops
