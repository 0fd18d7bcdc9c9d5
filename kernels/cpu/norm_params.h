// The CPU norm kernels' shared helpers (batch_norm.cpp, layer_norm.cpp): parameter vectors in the
// statistics dtype S, and the (T, S) dispatch: f64 input computes in f64, everything else in f32.
#pragma once
#include <type_traits>
#include <vector>

#include "runtime/backend/core.h"
#include "runtime/tensor.h"

namespace tandem::kernels::cpu_norm {

// A small parameter vector in the statistics type S (absent: `dflt`).
template <class S>
inline std::vector<S> vec(const Tensor& t, int64_t n, S dflt) {
  std::vector<S> v(static_cast<size_t>(n), dflt);
  if (t.defined()) convert_host(t.data_ptr(), t.dtype(), v.data(), dtype_v<S>, n);
  return v;
}
template <class S>
inline void store(const std::vector<S>& v, Tensor& t) {
  if (t.defined()) convert_host(v.data(), dtype_v<S>, t.data_ptr(), t.dtype(), t.numel());
}

template <class F>
inline void with_types(DType dt, const char* what, F&& f) {
  dispatch_floating(dt, what, [&](auto tag) {
    using T = decltype(tag);
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
      f(T{}, S{});
  });
}

}  // namespace tandem::kernels::cpu_norm
