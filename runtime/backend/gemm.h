// GEMM, the one matrix-multiply kernel behind matmul, linear and conv2d (im2col): Eigen on CPU,
// cuBLAS(Lt) on CUDA, the CPU GEMM standing in under the SIMT emulator.
#pragma once
#include <cstdint>

#include "runtime/backend/registry.h"
#include "runtime/dtype.h"

namespace tandem::kernels {

// Row-major, strided-batched: for each b < batch,
//   C_b[m, n] = alpha * op(A_b)[m, k] @ op(B_b)[k, n] + beta * C_b[m, n]
// op(X) = X^T when trans_X. lda/ldb/ldc are row strides (elements) of the matrices as stored.
// A, B, C share `dtype` (but see wide_c); accumulation is f32 for f16/bf16 (f64 for f64). beta == 0
// ignores C's prior contents (NaNs included).
struct GemmArgs {
  DType dtype = DType::f32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  double alpha = 1.0, beta = 0.0;
  // f32 A and B whose values are bf16 (an autocast region's widened operands): the CPU may multiply
  // them as bf16 pairs (vdpbf16ps, exact products, f32 sums); others compute in f32 as usual.
  bool bf16_products = false;
  // C is f32 while A and B are f16/bf16: the product is summed (beta 1) into an f32 buffer unrounded,
  // a weight gradient into its parameter's f32 .grad. Epilogue: a_row_sums only (still in `dtype`).
  bool wide_c = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries (0: shared)

  // Epilogue (batch == 1 only), in this order on each element of C before it is stored:
  //   v = alpha * op(A) op(B) + beta * C  (+ bias[j])  -> pre[i, j] = v  -> C[i, j] = gelu_tanh(v)
  const void* bias = nullptr;  // [n] in `dtype`, added to every row (a linear layer's bias)
  void* pre = nullptr;         // [m, n] with row stride ldc: v before GELU (its backward's input)
  bool gelu = false;           // GELU, tanh approximation (GPT-2's)
  // [m] in `dtype`: the sums over k of op(A) (a linear layer's bias gradient, made by its weight-
  // gradient GEMM dW = g^T x from g's columns). Excludes bias, pre and gelu.
  void* a_row_sums = nullptr;
  // The backward through GELU, on each element v of the product: C[i, j] = v * gelu_tanh'(dgelu_pre[i, j])
  // (dgelu_pre [m, n] in `dtype`, row stride ldc: GELU's stored input, dL/d(GELU's output) the
  // product); c_col_sums [n] in `dtype` (optional; needs ldc == n) = the sums over i of those C
  // values, the bias gradient of the linear GELU followed. Excludes bias, pre, gelu and a_row_sums.
  const void* dgelu_pre = nullptr;
  void* c_col_sums = nullptr;
  // a_row_sums / c_col_sums are added to instead of written, in the sums' own dtype (acc_t: f32 for
  // f16/bf16 and f32 operands, f64 for f64): a bias's .grad (gradient_sink), its sums unrounded and
  // no tensor or pass between.
  bool sums_add = false;

  bool has_epilogue() const { return bias || pre || gelu || a_row_sums || dgelu_pre || c_col_sums; }
};

// Checks the epilogue fields' combinations and wide_c's (a bad one is a bug in the caller).
void check_gemm_epilogue(const GemmArgs& args);

TANDEM_KERNEL(gemm, void(Device device, const GemmArgs& args));

}  // namespace tandem::kernels
