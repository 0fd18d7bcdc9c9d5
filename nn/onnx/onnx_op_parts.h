// What the op files of nn/onnx share: small helpers, and the shape ops (onnx_ops_shape.cpp) that
// the table in onnx_ops.cpp lists. Internal.
#pragma once
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "nn/onnx/onnx_ops.h"

namespace tandem::nn::onnx::detail {

inline std::vector<Value> one(Tensor t) { return {Value::of(std::move(t))}; }

// An axis in [-rank, rank) as a non-negative one.
inline int64_t axis_of(const OpCall& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

// The shape ops: Reshape, Flatten, Transpose, Concat, Pad, Split, Shape, Gather, Unsqueeze,
// Squeeze, Constant, Cast.
std::vector<Value> op_reshape(const OpCall& c);
std::vector<Value> op_flatten(const OpCall& c);
std::vector<Value> op_transpose(const OpCall& c);
std::vector<Value> op_concat(const OpCall& c);
std::vector<Value> op_pad(const OpCall& c);
std::vector<Value> op_split(const OpCall& c);
std::vector<Value> op_shape(const OpCall& c);
std::vector<Value> op_gather(const OpCall& c);
std::vector<Value> op_unsqueeze(const OpCall& c);
std::vector<Value> op_squeeze(const OpCall& c);
std::vector<Value> op_constant(const OpCall& c);
std::vector<Value> op_cast(const OpCall& c);

// Masks and index arithmetic (onnx_ops_select.cpp): Equal, Less, Greater, Not, Where, Expand, Slice,
// Range, ConstantOfShape.
std::vector<Value> op_equal(const OpCall& c);
std::vector<Value> op_less(const OpCall& c);
std::vector<Value> op_greater(const OpCall& c);
std::vector<Value> op_not(const OpCall& c);
std::vector<Value> op_where(const OpCall& c);
std::vector<Value> op_expand(const OpCall& c);
std::vector<Value> op_slice(const OpCall& c);
std::vector<Value> op_range(const OpCall& c);
std::vector<Value> op_constant_of_shape(const OpCall& c);

}  // namespace tandem::nn::onnx::detail
