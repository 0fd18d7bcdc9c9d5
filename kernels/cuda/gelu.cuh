// GELU in its tanh form (GPT-2's) and its input gradient, for the elementwise op and the GEMM
// epilogue kernels: one formula for both (cuBLASLt's GELU epilogue is the same approximation).
#pragma once
#include <cmath>

namespace tandem::TANDEM_CUDA_NS {

template <class X>
__host__ __device__ __forceinline__ X gelu_tanh(X v) {
  const X c1 = X(0.79788456080286535588), c2 = X(0.044715);
  return X(0.5) * v * (X(1) + std::tanh(c1 * (v + c2 * v * v * v)));
}

template <class X>
__host__ __device__ __forceinline__ X gelu_tanh_grad(X g, X v) {
  const X c1 = X(0.79788456080286535588), c2 = X(0.044715);
  X t = std::tanh(c1 * (v + c2 * v * v * v));
  X dinner = c1 * (X(1) + X(3) * c2 * v * v);
  return g * (X(0.5) * (X(1) + t) + X(0.5) * v * (X(1) - t * t) * dinner);
}

}  // namespace tandem::TANDEM_CUDA_NS
