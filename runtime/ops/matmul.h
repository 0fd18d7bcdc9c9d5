// Matrix products through the backend's GEMM (ours or Eigen on CPU, cuBLAS(Lt) on CUDA).
#pragma once
#include "runtime/tensor.h"

namespace tandem::ops {

// [M, K] @ [K, N] -> [M, N]; [B, M, K] @ [B, K, N] -> [B, M, N]; [B, M, K] @ [K, N] -> [B, M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] , weight [out, in], bias [out] (optional) -> [..., out]   (y = x W^T + b)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(x, weight, bias), tanh approximation) as one op: the GEMM's epilogue adds the bias and
// applies GELU (cuBLASLt on CUDA), keeping GELU's input for the backward. A transformer's MLP.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tandem::ops
