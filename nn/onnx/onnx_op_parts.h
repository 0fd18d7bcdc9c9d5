// What the op files of nn/onnx share: small helpers, and the shape ops (onnx_ops_shape.cpp) and the
// resampling ops (onnx_ops_resample.cpp) that the table in onnx_ops.cpp lists. Internal.
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

// The resampling ops: ConvTranspose, Resize.
std::vector<Value> op_conv_transpose(const OpCall& c);
std::vector<Value> op_resize(const OpCall& c);

// Resize's rule for one axis: ONNX's mode, coordinate_transformation_mode and nearest_mode.
enum class ResizeCoord { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric };
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
struct ResizeRule {
  bool linear = false;  // mode linear (else nearest)
  ResizeCoord coord = ResizeCoord::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
};
// The [in, out] matrix (row-major) whose product with an axis of size `in` resizes it to `out`:
// column j holds output j's weights (nearest: one 1; linear: two that sum to 1). `scale` is the one
// the coordinate transformation divides by (the node's scale, or out / in from sizes).
std::vector<double> resize_matrix(const ResizeRule& r, int64_t in, int64_t out, double scale);
// x [N, C, (H,) W] resized to the sizes out (of every axis; N and C unchanged) by one matrix product
// per resized axis: differentiable, on x's device and dtype.
Tensor resize_spatial(const Tensor& x, const ResizeRule& r, const std::vector<int64_t>& out,
                      const std::vector<double>& scales);

}  // namespace tandem::nn::onnx::detail
