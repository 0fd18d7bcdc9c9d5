// Helpers shared by the op entry points (runtime/ops/*.cpp): argument checks with messages that
// name the op, the shapes and the dtypes, dim normalisation, and the broadcast-gradient reduction.
#pragma once
#include <string>

#include <array>

#include "runtime/backend/pool.h"
#include "runtime/backend/reduce.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace tandem::ops::detail {

inline std::string describe(const Tensor& t) {
  return fmt::format("{} {} on {}", shape_str(t.shape()), dtype_name(t.dtype()), t.device().str());
}

inline void check_defined(const Tensor& t, const char* op, const char* arg) {
  TANDEM_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

// Same dtype and device, as every op here requires (no implicit type promotion).
inline void check_compatible(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "a");
  check_defined(b, op, "b");
  TANDEM_CHECK(a.dtype() == b.dtype(), "{}: dtype mismatch: {} vs {}; cast one operand (ops::cast) first", op,
               describe(a), describe(b));
  TANDEM_CHECK(a.device() == b.device(), "{}: device mismatch: {} vs {}; move one operand (ops::to_device) first",
               op, describe(a), describe(b));
}

inline void check_floating(const char* op, const Tensor& a) {
  TANDEM_CHECK(is_floating(a.dtype()), "{}: needs a floating tensor (f32, f64, f16, bf16), got {}", op,
               describe(a));
}

// dim in [-rank, rank) -> [0, rank).
inline int64_t normalize_dim(int64_t dim, int64_t rank, const char* op) {
  TANDEM_CHECK(dim >= -rank && dim < rank, "{}: dim {} is out of range for a tensor with {} dims", op, dim, rank);
  return dim < 0 ? dim + rank : dim;
}

// The gradient of a broadcast operand: g summed down to `shape` (g itself when shapes match).
inline Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  Tensor out = Tensor::empty(shape, g.dtype(), g.device());
  kernels::sum_to(g.device())(g, out, 1.0);
  return out;
}

// [outer, n, inner] around dim.
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit split_at(const Shape& s, int64_t dim) {
  DimSplit d;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < dim) d.outer *= s[static_cast<size_t>(i)];
    else if (i == dim) d.n = s[static_cast<size_t>(i)];
    else d.inner *= s[static_cast<size_t>(i)];
  }
  return d;
}

// The checked geometry of a pooling op on x (stride {0, 0}: = kernel); defined in ops/pool.cpp.
kernels::Pool2dGeometry pool_geometry(const char* op, const Tensor& x, std::array<int64_t, 2> kernel,
                                      std::array<int64_t, 2> stride, std::array<int64_t, 2> padding);

}  // namespace tandem::ops::detail
