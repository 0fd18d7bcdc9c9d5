// Elementwise kernel tables: broadcasting binary ops, unary/scalar ops and their fused backward.
// Shapes broadcast as NumPy; `broadcast_plan` (host code) turns shapes into coalesced strides that
// every backend can use.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

// Unary ops; `alpha` is the op's scalar where it has one.
//   AddScalar  y = x + alpha        MulScalar y = x * alpha      RsubScalar y = alpha - x
//   Pow        y = x ^ alpha        Neg  y = -x    Exp  Log  Sqrt  Tanh  Sigmoid
//   Relu       y = max(x, 0)        GeluErf  y = x Phi(x)        GeluTanh (tanh approximation)
enum class UnaryOp : uint8_t {
  AddScalar, MulScalar, RsubScalar, Pow, Neg, Exp, Log, Sqrt, Relu, GeluErf, GeluTanh, Tanh, Sigmoid
};
inline const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "binary";
}

// What unary_backward reads besides grad_y: the input x (Pow, Log, GeluErf, GeluTanh), the output y
// (Exp, Sqrt, Relu, Tanh, Sigmoid), or neither (AddScalar, MulScalar, RsubScalar, Neg).
enum class UnarySaves : uint8_t { None, Input, Output };
inline UnarySaves unary_saves(UnaryOp op) {
  switch (op) {
    case UnaryOp::Pow: case UnaryOp::Log: case UnaryOp::GeluErf: case UnaryOp::GeluTanh:
      return UnarySaves::Input;
    case UnaryOp::Exp: case UnaryOp::Sqrt: case UnaryOp::Relu: case UnaryOp::Tanh: case UnaryOp::Sigmoid:
      return UnarySaves::Output;
    default:
      return UnarySaves::None;
  }
}

// out = a (op) b. out [S] has the broadcast shape of a and b (ranks may differ; size-1 dims and
// missing leading dims broadcast). a, b, out share dtype and device. Computed in acc_t<T>.
// Integer dtypes: Add/Sub/Mul only.
TANDEM_KERNEL(binary, void(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out));

// y = op(x, alpha): x, y same shape, dtype (floating; AddScalar/MulScalar/Neg also integer) and device.
TANDEM_KERNEL(unary, void(UnaryOp op, const Tensor& x, Tensor& y, double alpha));

// grad_x = grad_y * dy/dx, in one pass. All of one shape, dtype and device. `x` and `y` are the
// forward's input and output; only the one named by unary_saves(op) is read, the other may be an
// undefined Tensor.
TANDEM_KERNEL(unary_backward, void(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y,
                                   Tensor& grad_x, double alpha));

// out = cond ? a : b, elementwise: cond (u8, nonzero is true), a and b broadcast to out's shape as
// in `binary`; a, b, out share dtype (any) and device. A select, not arithmetic: an inf or NaN in
// the branch not taken never reaches out (a masked_fill's -inf stays where the mask puts it).
TANDEM_KERNEL(where, void(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out));

// ---- host helpers shared by the backends ----

// Broadcast shape of a and b; throws ValueError naming both shapes (and `what`) when they do not
// broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

// Iteration plan over `out_shape` for operands of shapes broadcastable to it: dims of size 1
// dropped, adjacent dims merged where every operand stays linear across them. Operand k's element
// at out index (i_0, ..., i_{r-1}) sits at sum_d i_d * strides[k][d] (stride 0 on broadcast dims).
// sizes is never empty (a scalar iteration is sizes {1}).
struct BroadcastPlan {
  std::vector<int64_t> sizes;                 // [r]
  std::vector<std::vector<int64_t>> strides;  // [operands][r]
};
BroadcastPlan broadcast_plan(const Shape& out_shape, const std::vector<Shape>& operand_shapes);

// ---- inline definitions ----

inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    TANDEM_CHECK(da == db || da == 1 || db == 1,
                 "{}: shapes {} and {} do not broadcast (dim {}: {} vs {})", what, shape_str(a), shape_str(b),
                 i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

inline BroadcastPlan broadcast_plan(const Shape& out_shape, const std::vector<Shape>& operand_shapes) {
  const size_t r = out_shape.size(), k = operand_shapes.size();
  // Full-rank strides per operand, 0 where it broadcasts.
  std::vector<std::vector<int64_t>> full(k, std::vector<int64_t>(r, 0));
  for (size_t o = 0; o < k; ++o) {
    const Shape& s = operand_shapes[o];
    TANDEM_CHECK(s.size() <= r, "broadcast_plan: operand {} has more dims than {}", shape_str(s),
                 shape_str(out_shape));
    int64_t stride = 1;
    for (size_t j = s.size(); j-- > 0;) {
      size_t d = j + (r - s.size());
      TANDEM_CHECK(s[j] == out_shape[d] || s[j] == 1, "broadcast_plan: {} does not broadcast to {}",
                   shape_str(s), shape_str(out_shape));
      full[o][d] = s[j] == 1 ? 0 : stride;
      stride *= s[j];
    }
  }
  BroadcastPlan plan;
  plan.strides.assign(k, {});
  for (size_t d = 0; d < r; ++d) {
    if (out_shape[d] == 1) continue;
    if (!plan.sizes.empty()) {
      // Merge d into the previous (outer) dim when every operand is linear across both.
      bool mergeable = true;
      for (size_t o = 0; o < k; ++o)
        if (plan.strides[o].back() != full[o][d] * out_shape[d]) mergeable = false;
      if (mergeable) {
        plan.sizes.back() *= out_shape[d];
        for (size_t o = 0; o < k; ++o) plan.strides[o].back() = full[o][d];
        continue;
      }
    }
    plan.sizes.push_back(out_shape[d]);
    for (size_t o = 0; o < k; ++o) plan.strides[o].push_back(full[o][d]);
  }
  if (plan.sizes.empty()) {
    plan.sizes.push_back(1);
    for (size_t o = 0; o < k; ++o) plan.strides[o].push_back(0);
  }
  return plan;
}

}  // namespace tandem::kernels
