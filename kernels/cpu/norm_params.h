// The CPU norm kernels' shared helpers (batch_norm.cpp, layer_norm.cpp): parameter vectors in the
// statistics dtype S (the (T, S) dispatch, dispatch_norm_types, is runtime/backend/dtype_dispatch.h's).
#pragma once
#include <type_traits>
#include <vector>

#include "runtime/backend/core.h"
#include "runtime/backend/dtype_dispatch.h"
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

}  // namespace tandem::kernels::cpu_norm
