// The CUDA norm kernels' shared host helpers (batch_norm.cu, layer_norm_forward.cu,
// layer_norm_backward.cu): small parameter tensors cast to the statistics dtype S (f64 for f64 input,
// f32 otherwise; dispatch_norm_types, runtime/backend/dtype_dispatch.h) and results written back,
// and the block size for a row or channel of `work` elements.
#pragma once
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "runtime/backend/core.h"
#include "runtime/backend/dtype_dispatch.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// t converted to S on its device (undefined stays undefined).
inline Tensor as_stat(const Tensor& t, DType s) {
  if (!t.defined() || t.dtype() == s) return t;
  Tensor out = Tensor::empty(t.shape(), s, t.device());
  kernels::cast(t.device())(t, out);
  return out;
}
// Writes an S result into `out` of any dtype.
inline void store_stat(const Tensor& s, Tensor& out) {
  if (!out.defined() || s.is_same(out)) return;
  if (out.dtype() == s.dtype()) kernels::copy(out.device())(s, out);
  else kernels::cast(out.device())(s, out);
}
// A stat-dtype scratch for `out`: out itself when it already has dtype s.
inline Tensor stat_out(const Tensor& out, DType s) {
  if (!out.defined()) return Tensor();
  return out.dtype() == s ? out : Tensor::empty(out.shape(), s, out.device());
}
template <class S>
inline const S* ptr_or_null(const Tensor& t) { return t.defined() ? static_cast<const S*>(t.data_ptr()) : nullptr; }

inline unsigned threads_for(int64_t work) {
  int64_t t = (work + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
