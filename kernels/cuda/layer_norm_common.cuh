// Layer norm for the CUDA backend, what the forward (layer_norm_forward.cu: also the residual add
// fused before it) and the backward (layer_norm_backward.cu) share: x as [M, D], y's or dy's element
// type, which rows go a warp each, and the rows' 16-byte pack width. Statistics in S (f64 for f64
// input, f32 otherwise); small parameter tensors of another dtype are cast to S first. Elementwise
// formulas are the CPU's, in the same order; reductions differ only in summation order.
#pragma once
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/core.h"
#include "runtime/backend/norm.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// f(Y{}) with the element type of LayerNorm's y (or its backward's dy): T's, or f16/bf16 for f32 x
// (what check_layer_norm_output_dtype allows), written and read by the kernels directly: no cast launch after the
// forward nor before the backward.
template <class T, class F>
void with_narrow(DType y, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (y == DType::bf16) return f(bfloat16{});
    if (y == DType::f16) return f(half{});
  }
  f(T{});
}

// Rows up to kWarpRowMax elements go a warp each (kRowWarps rows a block): the block-per-row
// kernels (ln_forward_kernel, ln_backward_dx_kernel) spent a GPT-2 LayerNorm's [8192, 768] rows mostly in their block reductions' barriers,
// about three times the time of the bytes. V elements a load: a 16-byte pack where the rows allow it,
// else one (Pack<T, 1>).
constexpr int64_t kWarpRowMax = 8192;
constexpr int kRowWarps = 8;

// T's 16-byte pack width when D is a multiple of it and every row pointer is aligned to it, else 1.
template <class T>
int row_pack_width(int64_t D, std::initializer_list<const void*> rows) {
  bool packed = D % kPackWidth<T> == 0;
  for (const void* p : rows) packed = packed && aligned16(p);
  return packed ? kPackWidth<T> : 1;
}

// f(std::integral_constant<int, V>) with V = width, a row_pack_width<T> (T's pack width or 1).
template <class T, class F>
void with_pack_width(int width, F&& f) {
  if (width == kPackWidth<T>) f(std::integral_constant<int, kPackWidth<T>>{});
  else f(std::integral_constant<int, 1>{});
}

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
