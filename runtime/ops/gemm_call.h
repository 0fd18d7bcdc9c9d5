// The op entries' way to the backend's GEMM (matmul.cpp, mlp.cpp): one call with its epilogue on
// tensors, the weight-gradient GEMM that adds into a parameter's .grad where the engine offers it,
// and the operand checks. Internal: not installed.
#pragma once
#include <cstddef>
#include <utility>

#include "runtime/tensor.h"

namespace tandem::ops::detail {

// The epilogue of one GEMM (kernels::GemmArgs): tensors in the operands' dtype, undefined when unused.
struct GemmEpilogue {
  Tensor bias;        // [n], added to every row
  Tensor pre;         // [m, n]: GELU's input, stored
  bool gelu = false;
  Tensor a_row_sums;  // [m]: sums over k of op(A)
  Tensor dgelu_pre;   // [m, n]: GELU's input, read: C = product * gelu'(dgelu_pre)
  Tensor c_col_sums;  // [n]: sums over m of C after dgelu
  bool sums_add = false;  // a_row_sums / c_col_sums are a .grad (f32, f64 for f64) added to: sums_sink
};

// C[m, n] (+)= op(A) @ op(B) on contiguous row-major operands, `batch` times with the given
// element strides, then the epilogue (batch 1). C is A's and B's dtype, or f32 for f16/bf16 operands
// (GemmArgs::wide_c). Handles the empty cases itself (k == 0 leaves zeros, or C untouched with beta
// 1; callers with an epilogue handle k == 0 themselves).
void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, int64_t m, int64_t n, int64_t k,
          double beta = 0.0, int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0, int64_t stride_c = 0,
          const GemmEpilogue& epilogue = {});

void check_gemm_operands(const char* op, const Tensor& a, const Tensor& b);
// A linear layer's bias (argument `name` of `op`, may be undefined): [out] for weight [out, in], on
// the weight's device in its dtype.
void check_bias(const char* op, const char* name, const Tensor& weight, const Tensor& bias);

// In a backward: the parameter gradient that input `index`'s gradient (computed from g) may be
// summed into by its GEMM itself, beta 1 (gradient_sink), or undefined. g's dtype, or f32 for f16/bf16
// g (an autocast cast's parameter: the GEMM writes f32, unrounded, and no widening pass follows).
Tensor gemm_sink(size_t index, const Tensor& g);

// In a backward: the bias gradient that input `index`'s gradient (the sums of g's columns) may be
// added to by the GEMM epilogue itself (GemmEpilogue::sums_add, gradient_sink), or undefined: it
// must have the sums' dtype (f64 for f64 g, else f32; a bf16 bias's f32 .grad under autocast).
Tensor sums_sink(size_t index, const Tensor& g);

// The weight and bias gradients of y = x W^T + b (W [out, in] of shape sw, x [M, in]) from g = dL/dy:
// dW = g^T x, straight into the weight's .grad where the engine offers it for input `w_index` (then
// returned undefined), db = g's column sums by the same GEMM's epilogue, into the bias's .grad where
// the engine offers it for input `b_index` (sums_sink; then undefined too). {dW, db}, undefined
// where not asked for.
std::pair<Tensor, Tensor> weight_bias_grads(const Tensor& g, const Tensor& x, const Shape& sw, bool gw, bool gbias,
                                            size_t w_index, size_t b_index);

}  // namespace tandem::ops::detail
