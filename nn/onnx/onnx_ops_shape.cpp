// The ONNX shape ops: reshaping, joining and splitting tensors, and the shape arithmetic that
// exports compute sizes with (Shape, Gather, Unsqueeze, Concat feeding a Reshape), which runs on host
// integers.
#include <algorithm>
#include <optional>

#include "nn/onnx/onnx_op_parts.h"
#include "runtime/error.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::onnx::detail {


static Shape shape_from(const OpCall& c, const Shape& in, std::vector<int64_t> spec, bool allow_zero) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == 0 && !allow_zero) {
      if (i >= in.size()) c.fail("shape copies a dimension the input does not have");
      spec[i] = in[i];
    }
    if (spec[i] == -1) {
      if (infer >= 0) c.fail("shape has two -1 entries");
      infer = static_cast<int64_t>(i);
    } else {
      known *= spec[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || shape_numel(in) % known != 0)
      c.fail(fmt::format("cannot reshape {} into [{}]", shape_str(in), fmt::join(spec, ", ")));
    spec[static_cast<size_t>(infer)] = shape_numel(in) / known;
  }
  return Shape(spec.begin(), spec.end());
}

std::vector<Value> op_reshape(const OpCall& c) {
  const Value& x = c.input(0);
  const Shape s = shape_from(c, x.dims(), c.input(1).integers(), c.attr_int("allowzero", 0) != 0);
  if (x.host) {
    if (shape_numel(s) != static_cast<int64_t>(x.ints.size())) c.fail("reshape changes the number of elements");
    return {Value::of_ints(x.ints, s)};
  }
  return one(ops::reshape(x.t, s));
}

std::vector<Value> op_flatten(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const int64_t rank = x.dim(), axis = c.attr_int("axis", 1);
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank) c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  int64_t outer = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.size(i);
  return one(ops::reshape(x, {outer, outer == 0 ? 0 : x.numel() / std::max<int64_t>(outer, 1)}));
}

std::vector<Value> op_transpose(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int64_t i = x.dim() - 1; i >= 0; --i) perm.push_back(i);
  return one(ops::permute(x, perm));
}

std::vector<Value> op_concat(const OpCall& c) {
  if (c.in.empty()) c.fail("no inputs");
  std::vector<const Value*> parts;
  bool all_host = true;
  for (size_t i = 0; i < c.in.size(); ++i) {
    parts.push_back(&c.input(i));
    all_host = all_host && parts.back()->host;
  }
  const int64_t rank = static_cast<int64_t>(parts.front()->dims().size());
  const int64_t axis = axis_of(c, c.attr_int("axis", 0), rank);
  if (all_host) {
    if (rank != 1) c.fail("integer concatenation of rank > 1 is not supported");
    std::vector<int64_t> out;
    for (const Value* p : parts) out.insert(out.end(), p->ints.begin(), p->ints.end());
    const int64_t n = static_cast<int64_t>(out.size());
    return {Value::of_ints(std::move(out), {n})};
  }
  std::vector<Tensor> ts;
  for (const Value* p : parts) ts.push_back(p->tensor(c.device));
  return one(ops::concat(ts, axis));
}

// Pad: PyTorch's AvgPool2d exports one with all-zero pads in front of AveragePool, a no-op. A real
// padding is refused for now (a Conv or pool's own pads are supported).
std::vector<Value> op_pad(const OpCall& c) {
  if (c.attr_string("mode", "constant") != "constant") c.fail("only constant padding is supported");
  const std::vector<int64_t> pads = c.has_input(1) ? c.input(1).integers() : c.attr_ints("pads");
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
    c.fail(fmt::format("pads [{}] are not supported (all zero only)", fmt::join(pads, ", ")));
  return {c.input(0)};
}

// Split along `axis` into the node's outputs: sizes from the second input (opset 13) or the
// attribute (before), else equal parts.
std::vector<Value> op_split(const OpCall& c) {
  const Tensor x = c.tensor(0);
  const int64_t axis = axis_of(c, c.attr_int("axis", 0), x.dim());
  const size_t parts = c.node.outputs.size();
  std::vector<int64_t> sizes = c.has_input(1) ? c.input(1).integers() : c.attr_ints("split");
  if (sizes.empty()) {
    if (parts == 0 || x.size(axis) % static_cast<int64_t>(parts) != 0)
      c.fail(fmt::format("{} does not split into {} equal parts along axis {}", shape_str(x.shape()), parts, axis));
    sizes.assign(parts, x.size(axis) / static_cast<int64_t>(parts));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) c.fail("a negative split size");
    total += s;
  }
  if (sizes.size() != parts || total != x.size(axis))
    c.fail(fmt::format("split sizes [{}] do not cover {} along axis {} in {} outputs", fmt::join(sizes, ", "),
                       shape_str(x.shape()), axis, parts));
  std::vector<Value> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(Value::of(ops::narrow(x, axis, start, s)));
    start += s;
  }
  return out;
}

std::vector<Value> op_shape(const OpCall& c) {
  const Shape s = c.input(0).dims();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  const int64_t n = static_cast<int64_t>(dims.size());
  return {Value::of_ints(std::move(dims), {n})};
}

// Gather: rows of a tensor along axis 0 (an embedding lookup: nn.Embedding exports Gather(weight,
// ids)), or host integers (picking dims out of a Shape).
std::vector<Value> op_gather(const OpCall& c) {
  const Value& data = c.input(0);
  const Value& idx = c.input(1);
  if (!data.host) {
    if (c.attr_int("axis", 0) != 0) c.fail("a tensor's Gather along an axis other than 0 is not supported");
    const Tensor ids = c.tensor(1);
    if (is_floating(ids.dtype())) c.fail("indices must be integers");
    const Tensor rows = c.tensor(0);
    if (rows.dim() != 2) c.fail(fmt::format("a tensor's Gather takes rows of a matrix; the data is {}", shape_str(rows.shape())));
    return one(ops::embedding(ids, rows));
  }
  if (data.shape.size() != 1 || c.attr_int("axis", 0) != 0) c.fail("only a 1-D integer Gather along axis 0 runs");
  const std::vector<int64_t> at = idx.integers();
  std::vector<int64_t> out;
  const int64_t n = static_cast<int64_t>(data.ints.size());
  for (int64_t i : at) {
    const int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) c.fail(fmt::format("index {} is out of range for {} values", i, n));
    out.push_back(data.ints[static_cast<size_t>(j)]);
  }
  return {Value::of_ints(std::move(out), idx.dims())};
}

// Unsqueeze and Squeeze: axes from the second input (opset 13) or the attribute (before).
static std::vector<int64_t> axes_of(const OpCall& c) {
  if (c.has_input(1)) return c.input(1).integers();
  return c.attr_ints("axes");
}

std::vector<Value> op_unsqueeze(const OpCall& c) {
  const Value& x = c.input(0);
  Shape s = x.dims();
  std::vector<int64_t> axes = axes_of(c);
  const int64_t rank = static_cast<int64_t>(s.size() + axes.size());
  for (int64_t& a : axes) a = axis_of(c, a, rank);
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes) s.insert(s.begin() + a, 1);
  if (x.host) return {Value::of_ints(x.ints, s)};
  return one(ops::reshape(x.t, s));
}

std::vector<Value> op_squeeze(const OpCall& c) {
  const Value& x = c.input(0);
  const Shape in = x.dims();
  std::vector<int64_t> axes = axes_of(c);
  const int64_t rank = static_cast<int64_t>(in.size());
  for (int64_t& a : axes) a = axis_of(c, a, rank);
  Shape s;
  for (int64_t i = 0; i < rank; ++i) {
    const bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (listed && in[static_cast<size_t>(i)] != 1) c.fail(fmt::format("axis {} has size {}, not 1", i, in[i]));
    if (!(listed || (axes.empty() && in[static_cast<size_t>(i)] == 1))) s.push_back(in[static_cast<size_t>(i)]);
  }
  if (x.host) return {Value::of_ints(x.ints, s)};
  return one(ops::reshape(x.t, s));
}

std::vector<Value> op_constant(const OpCall& c) {
  if (const Tensor* t = c.attr_tensor("value")) {
    if (t->dtype() == DType::i64 && t->numel() <= 1024) return {Value::of_ints(t->to_vector<int64_t>(), t->shape())};
    return one(t->to(c.device));
  }
  if (c.node.attributes.count("value_int")) return {Value::of_ints({c.attr_int("value_int", 0)}, {})};
  if (c.node.attributes.count("value_ints")) {
    std::vector<int64_t> v = c.attr_ints("value_ints");
    const int64_t n = static_cast<int64_t>(v.size());
    return {Value::of_ints(std::move(v), {n})};
  }
  if (c.node.attributes.count("value_float"))
    return one(Tensor::full({}, c.attr_float("value_float", 0), DType::f32, c.device));
  c.fail("only value, value_int, value_ints and value_float constants are supported");
}

std::vector<Value> op_cast(const OpCall& c) {
  const Value& x = c.input(0);
  const int64_t to = c.attr_int("to", 1);
  if (to == 7) return {x.host ? x : Value::of_ints(x.integers(), x.dims())};  // INT64: shape arithmetic
  if (to == 9) {  // BOOL: a mask, kept as host 0/1 (a boolean tensor, u8 already, stays one)
    if (!x.host && x.t.dtype() == DType::u8) return {x};
    std::vector<int64_t> bits;
    for (double v : x.numbers())
      bits.push_back(v != 0 ? 1 : 0);
    return {Value::of_ints(std::move(bits), x.dims())};
  }
  if (to == 1) return one(ops::cast(x.tensor(c.device), DType::f32));  // host integers too (arange(T).float())
  if (to == 11) return one(ops::cast(x.tensor(c.device), DType::f64));
  if (x.host) c.fail(fmt::format("casting integers to element type {} is not supported", to));
  c.fail(fmt::format("cast to element type {} is not supported", to));
}

}  // namespace tandem::nn::onnx::detail
