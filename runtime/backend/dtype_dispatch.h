// The kernels' dtype dispatch beyond dispatch() (runtime/dtype.h): the forms more than one kernel
// file needs, written once for the CPU kernels and the .cu kernels alike (nvcc's host code and the
// SIMT emulator's build both compile it). Each instantiates f only for the types it can call it
// with, so a body need not compile for the rest.
#pragma once
#include <cstdint>
#include <type_traits>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace tandem {

// f(T{}) for a floating dtype (f32, f64, f16, bf16); others throw dispatch_floating's error naming
// `what`.
template <class F>
void dispatch_floating_only(DType dt, const char* what, F&& f) {
  dispatch_floating(dt, what, [&](auto tag) {
    if constexpr (is_floating_type_v<decltype(tag)>) f(tag);
  });
}

// f(T{}, S{}) for a floating dtype: T its C++ type, S the type statistics are kept in (a norm's mean
// and variance): f64 for f64 input, f32 for the rest.
template <class F>
void dispatch_norm_types(DType dt, const char* what, F&& f) {
  dispatch_floating(dt, what, [&](auto tag) {
    using T = decltype(tag);
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if constexpr (is_floating_type_v<T>) f(T{}, S{});
  });
}

// f(P{}, G{}) for the C++ types of two floating dtypes (parameter and gradient, source and
// destination).
template <class F>
void dispatch_floating_pair(DType first, DType second, const char* what, F&& f) {
  dispatch_floating(first, what, [&](auto pt) {
    using P = decltype(pt);  // named here: decltype(pt) inside the inner lambda is not P under g++
    dispatch_floating(second, what, [&](auto gt) {
      using G = decltype(gt);
      if constexpr (is_floating_type_v<P> && is_floating_type_v<G>) f(P{}, G{});
    });
  });
}

// f(int32_t{}) or f(int64_t{}) for an index tensor's dtype; `what` names the tensor in the error for
// any other ("embedding: indices").
template <class F>
void dispatch_index_type(const Tensor& indices, const char* what, F&& f) {
  if (indices.dtype() == DType::i32) f(int32_t{});
  else if (indices.dtype() == DType::i64) f(int64_t{});
  else TANDEM_FAIL(Value, "{} must be i32 or i64, got {}", what, dtype_name(indices.dtype()));
}

}  // namespace tandem
