// ONNX ops on tandem's ops (the shape ops: onnx_ops_shape.cpp), and the table of what runs from which
// opset. Each function reads the node's attributes as the ONNX operator
// specification gives them (defaults included) and refuses, naming the node, what tandem's op cannot
// do (dilated or grouped convolutions, ceil-mode pooling, ...): an error, never a different result.
#include "nn/onnx/onnx_ops.h"

#include "nn/onnx/onnx_op_parts.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "runtime/error.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/dropout.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/matmul.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/pool.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/shape.h"
#include "runtime/backend/elementwise.h"

namespace tandem::nn::onnx {

// ---- values and calls ----

Tensor Value::tensor(Device device) const {
  if (!host) return t;
  return Tensor::from_vector(ints, shape, DType::i64).to(device);
}

std::vector<int64_t> Value::integers() const {
  if (host) return ints;
  return t.to(kCPU).to_vector<int64_t>();
}

std::vector<double> Value::numbers() const {
  if (host) return std::vector<double>(ints.begin(), ints.end());
  return t.to(kCPU).to_vector<double>();
}

const Value& OpCall::input(size_t i) const {
  if (!has_input(i)) fail(fmt::format("input {} is missing", i));
  return *in[i];
}

Tensor OpCall::tensor(size_t i) const { return input(i).tensor(device); }

int64_t OpCall::attr_int(const std::string& name, int64_t otherwise) const {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return otherwise;
  if (it->second.kind != Attribute::Kind::Int) fail(fmt::format("attribute {} is not an integer", name));
  return it->second.i;
}

double OpCall::attr_float(const std::string& name, double otherwise) const {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return otherwise;
  if (it->second.kind != Attribute::Kind::Float) fail(fmt::format("attribute {} is not a float", name));
  return it->second.f;
}

std::string OpCall::attr_string(const std::string& name, const std::string& otherwise) const {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return otherwise;
  if (it->second.kind != Attribute::Kind::String) fail(fmt::format("attribute {} is not a string", name));
  return it->second.s;
}

std::vector<int64_t> OpCall::attr_ints(const std::string& name, const std::vector<int64_t>& otherwise) const {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return otherwise;
  if (it->second.kind != Attribute::Kind::Ints) fail(fmt::format("attribute {} is not a list of integers", name));
  return it->second.ints;
}

const Tensor* OpCall::attr_tensor(const std::string& name) const {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end() || it->second.kind != Attribute::Kind::Tensor) return nullptr;
  return &it->second.t;
}

void OpCall::fail(const std::string& what) const {
  throw ValueError(fmt::format("{}: node '{}' ({}, opset {}): {}", graph.path, node.name, node.op, graph.opset, what));
}

namespace {

using namespace detail;

// ---- elementwise ----

// A host integer op's result, or nullopt where int64 cannot hold it (or, dividing, y is 0).
using HostIntOp = std::optional<int64_t> (*)(int64_t, int64_t);

// Host integers combined elementwise with NumPy broadcasting (shape arithmetic: batch * channels).
Value host_binary(const OpCall& c, const Value& a, const Value& b, HostIntOp f) {
  if (a.ints.size() == 1 || b.ints.size() == 1 || a.shape == b.shape) {
    const Value& big = a.ints.size() >= b.ints.size() ? a : b;
    std::vector<int64_t> out(big.ints.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t x = a.ints[a.ints.size() == 1 ? 0 : i], y = b.ints[b.ints.size() == 1 ? 0 : i];
      const std::optional<int64_t> r = f(x, y);
      if (!r) c.fail(fmt::format("the integer values {} and {} have no int64 result", x, y));
      out[i] = *r;
    }
    return Value::of_ints(std::move(out), big.shape);
  }
  c.fail(fmt::format("integer shapes {} and {} do not broadcast here", shape_str(a.shape), shape_str(b.shape)));
}

template <Tensor (*Op)(const Tensor&, const Tensor&)>
std::vector<Value> binary(const OpCall& c, HostIntOp host) {
  const Value &a = c.input(0), &b = c.input(1);
  if (a.host && b.host) return {host_binary(c, a, b, host)};
  return one(Op(a.tensor(c.device), b.tensor(c.device)));
}

// Shape arithmetic on the host, checked: integers (a model's, or a corrupt file's) that overflow
// int64 or divide by zero fail the node instead of giving a wrong shape. Div truncates toward zero,
// as ONNX's integer Div does.
enum class IntOp { add, sub, mul, div };
template <IntOp O>
std::optional<int64_t> int_op(int64_t x, int64_t y) {
  int64_t r = 0;
  bool undefined = false;
  if constexpr (O == IntOp::add) {
    undefined = __builtin_add_overflow(x, y, &r);
  } else if constexpr (O == IntOp::sub) {
    undefined = __builtin_sub_overflow(x, y, &r);
  } else if constexpr (O == IntOp::mul) {
    undefined = __builtin_mul_overflow(x, y, &r);
  } else {
    undefined = y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1);
    if (!undefined) r = x / y;
  }
  if (undefined) return std::nullopt;
  return r;
}

std::vector<Value> op_add(const OpCall& c) { return binary<ops::add>(c, &int_op<IntOp::add>); }
std::vector<Value> op_sub(const OpCall& c) { return binary<ops::sub>(c, &int_op<IntOp::sub>); }
std::vector<Value> op_mul(const OpCall& c) { return binary<ops::mul>(c, &int_op<IntOp::mul>); }
std::vector<Value> op_div(const OpCall& c) { return binary<ops::div>(c, &int_op<IntOp::div>); }

std::vector<Value> op_relu(const OpCall& c) { return one(ops::relu(c.tensor(0))); }
std::vector<Value> op_sqrt(const OpCall& c) { return one(ops::sqrt(c.tensor(0))); }

// min(max(x, lo), hi) from relus: lo + relu(x - lo), then hi - relu(hi - y). The gradient is 1 strictly
// inside (lo, hi) and 0 outside, as PyTorch's clamp (which also passes it on the bounds themselves).
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor y = x;
  if (lo) y = ops::add(ops::relu(ops::add(y, -*lo)), *lo);
  if (hi) y = ops::rsub(*hi, ops::relu(ops::rsub(*hi, y)));
  return y;
}

// Input i as one number (nullopt where the node omits it); `what` names it when it is not a scalar.
std::optional<double> scalar_input(const OpCall& c, size_t i, const char* what) {
  if (!c.has_input(i)) return std::nullopt;
  const std::vector<double> v = c.input(i).numbers();
  if (v.size() != 1) c.fail(fmt::format("{} is not a scalar", what));
  return v[0];
}

// Clip: the bounds are inputs from opset 11 (ReLU6 exports Clip(x, 0, 6)), attributes before.
std::vector<Value> op_clip(const OpCall& c) {
  if (c.graph.opset >= 11) return one(clamp(c.tensor(0), scalar_input(c, 1, "min"), scalar_input(c, 2, "max")));
  const auto& a = c.node.attributes;
  std::optional<double> lo, hi;
  if (a.count("min")) lo = c.attr_float("min", 0);
  if (a.count("max")) hi = c.attr_float("max", 0);
  return one(clamp(c.tensor(0), lo, hi));
}

// clip(alpha x + beta, 0, 1).
Tensor hard_sigmoid(const Tensor& x, double alpha, double beta) {
  return clamp(ops::add(ops::mul(x, alpha), beta), 0.0, 1.0);
}

// HardSigmoid (PyTorch's Hardsigmoid exports alpha 1/6).
std::vector<Value> op_hard_sigmoid(const OpCall& c) {
  return one(hard_sigmoid(c.tensor(0), c.attr_float("alpha", 0.2), c.attr_float("beta", 0.5)));
}

// HardSwish (opset 14): x * hardsigmoid(x) with alpha 1/6, beta 1/2.
std::vector<Value> op_hard_swish(const OpCall& c) {
  const Tensor x = c.tensor(0);
  return one(ops::mul(x, hard_sigmoid(x, 1.0 / 6.0, 0.5)));
}

// The exponent is a constant scalar (LayerNorm's decomposition writes x ** 2.0).
std::vector<Value> op_pow(const OpCall& c) {
  c.input(1);  // required: an error naming the node where it is missing
  return one(ops::pow(c.tensor(0), *scalar_input(c, 1, "the exponent (only a scalar one is supported)")));
}

// Erf runs where it is GELU's (OnnxModel fuses x * 0.5 * (1 + erf(x / sqrt 2)) into one gelu);
// anywhere else it is refused at load (onnx_model.cpp), so this never runs alone.
std::vector<Value> op_erf(const OpCall& c) { c.fail("Erf outside a GELU (x * 0.5 * (1 + erf(x / sqrt(2)))) is not supported"); }

// GELU(x): the fused form of the Erf pattern, x in input 0.
std::vector<Value> op_gelu(const OpCall& c) { return one(ops::gelu(c.tensor(0), false)); }
std::vector<Value> op_sigmoid(const OpCall& c) { return one(ops::sigmoid(c.tensor(0))); }
std::vector<Value> op_tanh(const OpCall& c) { return one(ops::tanh(c.tensor(0))); }
std::vector<Value> op_identity(const OpCall& c) { return {c.input(0)}; }

// Dropout (opset 12+: ratio and training_mode are inputs). It follows the model's train()/eval(),
// whatever the export's training_mode says, like BatchNormalization.
std::vector<Value> op_dropout(const OpCall& c) {
  const double ratio = scalar_input(c, 1, "ratio").value_or(0.5);
  std::vector<Value> out = one(ops::dropout(c.tensor(0), ratio, c.training));
  if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) c.fail("the mask output is not supported");
  return out;
}

// ---- linear algebra ----

// tandem's matmul takes [M, K] @ [K, N], [B, M, K] @ [B, K, N] or [B, M, K] @ [K, N]: the leading
// dims of a 4-D (or deeper) product, attention's [batch, heads, T, D], are folded into one. Leading
// dims that differ broadcast (NumPy): the operand with fewer is expanded first (x * 1, exact; its
// gradient sums back), so [B, H, T, D] @ [H, D, E] runs as one batched product.
std::vector<Value> op_matmul(const OpCall& c) {
  Tensor a = c.tensor(0), b = c.tensor(1);
  if (a.dim() < 2 || b.dim() < 2)
    c.fail(fmt::format("shapes {} and {}: a 1-D operand is not supported", shape_str(a.shape()), shape_str(b.shape())));
  if ((a.dim() <= 3 && a.dim() == b.dim() && a.size(0) == b.size(0)) || (a.dim() <= 3 && b.dim() == 2))
    return one(ops::matmul(a, b));
  const Shape lead_a(a.shape().begin(), a.shape().end() - 2), lead_b(b.shape().begin(), b.shape().end() - 2);
  const Shape lead = b.dim() == 2 ? lead_a : kernels::broadcast_shapes(lead_a, lead_b, "MatMul's leading dims");
  auto expanded = [&](const Tensor& t, const Shape& t_lead) {
    if (t_lead == lead) return t;
    Shape full = lead;
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    return ops::mul(t, Tensor::ones(full, t.dtype(), t.device()));
  };
  a = expanded(a, lead_a);
  if (b.dim() != 2) b = expanded(b, lead_b);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1), batch = shape_numel(lead);
  if (b.size(-2) != k)
    c.fail(fmt::format("shapes {} and {} do not multiply", shape_str(a.shape()), shape_str(b.shape())));
  Tensor a3 = ops::reshape(a, {batch, m, k});
  Tensor b3 = b.dim() == 2 ? b : ops::reshape(b, {batch, k, n});
  Shape out = lead;
  out.push_back(m);
  out.push_back(n);
  return one(ops::reshape(ops::matmul(a3, b3), out));
}

// Y = alpha * A' B' + beta * C (A' = A or A^T, B' = B or B^T). torch.nn.Linear exports transB = 1:
// ops::linear, whose backward is one GEMM per operand.
std::vector<Value> op_gemm(const OpCall& c) {
  Tensor a = c.tensor(0), b = c.tensor(1);
  if (c.attr_int("transA", 0)) a = ops::transpose(a, 0, 1);
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Tensor bias = c.has_input(2) ? c.tensor(2) : Tensor();
  if (bias.defined() && beta != 1.0) bias = ops::mul(bias, beta);
  Tensor y;
  if (c.attr_int("transB", 0)) {
    y = ops::linear(a, b, alpha == 1.0 ? bias : Tensor());
  } else {
    y = ops::matmul(a, b);
    if (alpha == 1.0 && bias.defined()) y = ops::add(y, bias);
  }
  if (alpha != 1.0) {
    y = ops::mul(y, alpha);
    if (bias.defined()) y = ops::add(y, bias);
  }
  return one(y);
}

// ---- convolution, normalisation, pooling ----

// Symmetric 2-D padding from ONNX's [top, left, bottom, right].
std::array<int64_t, 2> symmetric_pads(const OpCall& c) {
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") c.fail("auto_pad " + auto_pad + " is not supported (give pads)");
  const std::vector<int64_t> p = c.attr_ints("pads", {0, 0, 0, 0});
  if (p.size() != 4) c.fail(fmt::format("pads has {} entries; tandem runs 2-D windows (4 pads)", p.size()));
  if (p[0] != p[2] || p[1] != p[3]) c.fail(fmt::format("pads [{}] are not symmetric", fmt::join(p, ", ")));
  if (p[0] < 0 || p[1] < 0) c.fail(fmt::format("pads [{}] are negative", fmt::join(p, ", ")));
  return {p[0], p[1]};
}

// A window's kernel_shape or strides: two entries, each >= 1.
std::array<int64_t, 2> pair_of(const OpCall& c, const char* name, std::array<int64_t, 2> otherwise) {
  const std::vector<int64_t> v = c.attr_ints(name, {otherwise[0], otherwise[1]});
  if (v.size() != 2) c.fail(fmt::format("{} has {} entries; tandem runs 2-D windows", name, v.size()));
  if (v[0] < 1 || v[1] < 1) c.fail(fmt::format("{} [{}, {}] must be >= 1", name, v[0], v[1]));
  return {v[0], v[1]};
}

void need_unit_dilations(const OpCall& c) {
  const std::vector<int64_t> d = c.attr_ints("dilations", {1, 1});
  if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; }))
    c.fail(fmt::format("dilations [{}] are not supported (1 only)", fmt::join(d, ", ")));
}

// A grouped convolution (MobileNet's depthwise ones: group = channels) runs as one conv per group
// on its slice of the channels, concatenated: the same values, one kernel call per group.
std::vector<Value> op_conv(const OpCall& c) {
  const Tensor x = c.tensor(0), w = c.tensor(1);
  const Tensor b = c.has_input(2) ? c.tensor(2) : Tensor();
  if (x.dim() != 4 || w.dim() != 4) c.fail(fmt::format("input of rank {}: tandem runs 2-D convolutions", x.dim()));
  need_unit_dilations(c);
  const std::array<int64_t, 2> pads = symmetric_pads(c), strides = pair_of(c, "strides", {1, 1});
  const int64_t group = c.attr_int("group", 1);
  if (group == 1) return one(ops::conv2d(x, w, b, strides, pads));
  if (group < 1 || x.size(1) % group != 0 || w.size(0) % group != 0 || w.size(1) * group != x.size(1))
    c.fail(fmt::format("group {} does not divide input {} and weight {}", group, shape_str(x.shape()),
                       shape_str(w.shape())));
  const int64_t in = x.size(1) / group, out = w.size(0) / group;
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < group; ++g)
    parts.push_back(ops::conv2d(ops::narrow(x, 1, g * in, in), ops::narrow(w, 0, g * out, out),
                                b.defined() ? ops::narrow(b, 0, g * out, out) : Tensor(), strides, pads));
  return one(ops::concat(parts, 1));
}

// The running statistics are the model's buffers (inputs 3 and 4 are initializers): ops::batch_norm
// updates them in place in training mode with PyTorch's rule. ONNX's momentum weighs the old value
// (running = running * momentum + batch * (1 - momentum)), PyTorch's the new one: 1 - momentum.
std::vector<Value> op_batch_norm(const OpCall& c) {
  const double eps = c.attr_float("epsilon", 1e-5), momentum = c.attr_float("momentum", 0.9);
  Tensor mean = c.tensor(3), var = c.tensor(4);
  Tensor y = ops::batch_norm(c.tensor(0), c.tensor(1), c.tensor(2), mean, var, c.training, 1.0 - momentum, eps,
                             c.epilogue ? *c.epilogue : ops::BatchNormEpilogue{});
  std::vector<Value> out = one(y);
  // A training export asks for the updated statistics as outputs too: they are the buffers.
  out.push_back(Value::of(mean));
  out.push_back(Value::of(var));
  return out;
}

std::vector<Value> op_max_pool(const OpCall& c) {
  if (c.attr_int("ceil_mode", 0) != 0) c.fail("ceil_mode 1 is not supported");
  if (c.attr_int("storage_order", 0) != 0) c.fail("storage_order 1 is not supported");
  if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) c.fail("the Indices output is not supported");
  need_unit_dilations(c);
  const std::array<int64_t, 2> k = pair_of(c, "kernel_shape", {0, 0});  // required: {0, 0} fails
  return one(ops::max_pool2d(c.tensor(0), k, pair_of(c, "strides", {1, 1}), symmetric_pads(c)));
}

std::vector<Value> op_average_pool(const OpCall& c) {
  if (c.attr_int("ceil_mode", 0) != 0) c.fail("ceil_mode 1 is not supported");
  const std::array<int64_t, 2> pads = symmetric_pads(c);
  // tandem's average counts the padding (PyTorch's default); ONNX's default does not.
  if ((pads[0] || pads[1]) && c.attr_int("count_include_pad", 0) == 0)
    c.fail("count_include_pad 0 with padding is not supported");
  const std::array<int64_t, 2> k = pair_of(c, "kernel_shape", {0, 0});
  return one(ops::avg_pool2d(c.tensor(0), k, pair_of(c, "strides", {1, 1}), pads));
}

std::vector<Value> op_global_average_pool(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  if (x.dim() != 4) c.fail(fmt::format("input of rank {}; tandem pools [N, C, H, W]", x.dim()));
  return one(ops::mean(ops::mean(x, 3, true), 2, true));
}

// LayerNormalization (opset 17): over the dims from `axis` on.
std::vector<Value> op_layer_norm(const OpCall& c) {
  const Tensor x = c.tensor(0);
  const int64_t axis = axis_of(c, c.attr_int("axis", -1), x.dim());
  for (size_t k = 1; k < c.node.outputs.size(); ++k)
    if (!c.node.outputs[k].empty()) c.fail("the Mean and InvStdDev outputs are not supported");
  return one(ops::layer_norm(x, x.dim() - axis, c.tensor(1), c.has_input(2) ? c.tensor(2) : Tensor(),
                             c.attr_float("epsilon", 1e-5)));
}

std::vector<Value> op_softmax(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  return one(ops::softmax(x, axis_of(c, c.attr_int("axis", -1), x.dim())));
}

// ReduceSum (axes an input from opset 13) and ReduceMean (axes an attribute until opset 18).
template <bool Mean>
std::vector<Value> reduce(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  std::vector<int64_t> axes = !Mean && c.graph.opset >= 13 ? (c.has_input(1) ? c.input(1).integers()
                                                                              : std::vector<int64_t>{})
                                                           : c.attr_ints("axes");
  const bool keep = c.attr_int("keepdims", 1) != 0;
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0)) return {c.input(0)};
    for (int64_t i = 0; i < x.dim(); ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) a = axis_of(c, a, x.dim());
  std::sort(axes.rbegin(), axes.rend());  // the highest first: the lower ones keep their index
  Tensor y = x;
  for (int64_t a : axes) y = Mean ? ops::mean(y, a, keep) : ops::sum(y, a, keep);
  return one(y);
}

const OpEntry kOps[] = {
    {"Add", 7, op_add},
    {"AveragePool", 11, op_average_pool},
    {"BatchNormalization", 9, op_batch_norm},
    {"Cast", 13, op_cast},
    {"Clip", 6, op_clip},
    {"Concat", 11, op_concat},
    {"Constant", 11, op_constant},
    {"ConstantOfShape", 9, op_constant_of_shape},
    {"Conv", 11, op_conv},
    {"ConvTranspose", 11, op_conv_transpose},
    {"Div", 7, op_div},
    {"Dropout", 12, op_dropout},
    {"Equal", 11, op_equal},
    {"Erf", 9, op_erf},
    {"Expand", 8, op_expand},
    {"Flatten", 11, op_flatten},
    {"Gather", 11, op_gather},
    {"Gemm", 11, op_gemm},
    {"GlobalAveragePool", 1, op_global_average_pool},
    {"Greater", 9, op_greater},
    {"HardSigmoid", 6, op_hard_sigmoid},
    {"HardSwish", 14, op_hard_swish},
    {"Identity", 1, op_identity},
    {"LayerNormalization", 17, op_layer_norm},
    {"Less", 9, op_less},
    {"MatMul", 9, op_matmul},
    {"MaxPool", 12, op_max_pool},
    {"Mul", 7, op_mul},
    {"Not", 1, op_not},
    {"Pad", 11, op_pad},
    {"Pow", 7, op_pow},
    {"Range", 11, op_range},
    {"ReduceMean", 11, reduce<true>},
    {"ReduceSum", 11, reduce<false>},
    {"Relu", 6, op_relu},
    {"Reshape", 5, op_reshape},
    {"Resize", 11, op_resize},
    {"Shape", 1, op_shape},
    {"Sigmoid", 6, op_sigmoid},
    {"Slice", 10, op_slice},
    {"Softmax", 13, op_softmax},
    {"Split", 13, op_split},
    {"Sqrt", 6, op_sqrt},
    {"Squeeze", 11, op_squeeze},
    {"Sub", 7, op_sub},
    {"Tanh", 6, op_tanh},
    {"Transpose", 1, op_transpose},
    {"Unsqueeze", 11, op_unsqueeze},
    {"Where", 9, op_where},
};

}  // namespace

OpFn find_op(const std::string& op, int64_t opset) {
  // ReduceMean's axes became an input in opset 18: its function reads the attribute.
  if (op == "ReduceMean" && opset >= 18) return nullptr;
  for (const OpEntry& e : kOps)
    if (op == e.op && opset >= e.since) return e.fn;
  return nullptr;
}

OpFn gelu_op() { return op_gelu; }

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (const OpEntry& e : kOps) names.emplace_back(e.op);
  std::sort(names.begin(), names.end());
  return names;
}

bool carries_gradient(const Node& node, size_t input) {
  const std::string& op = node.op;
  // Booleans, shapes and positions: nothing differentiable comes out of them.
  static const char* const kNone[] = {"ConstantOfShape", "Equal", "Greater", "Less", "Not", "Range", "Shape"};
  for (const char* o : kNone)
    if (op == o) return false;
  // Data in input 0; the rest are shapes, axes, indices, bounds or a ratio.
  static const char* const kFirst[] = {"Dropout", "Expand", "Gather", "Pad", "Pow", "ReduceMean", "ReduceSum",
                                       "Reshape", "Resize", "Slice", "Split", "Squeeze", "Unsqueeze", "Clip"};
  for (const char* o : kFirst)
    if (op == o) return input == 0;
  if (op == "Where") return input == 1 || input == 2;
  if (op == "BatchNormalization") return input <= 2;  // 3 and 4 are the running statistics
  if (op == "Cast") {  // a cast to a floating type passes the gradient; to integers or booleans not
    auto to = node.attributes.find("to");
    const int64_t t = to == node.attributes.end() ? 1 : to->second.i;
    return input == 0 && (t == 1 || t == 10 || t == 11 || t == 16);
  }
  return true;
}

}  // namespace tandem::nn::onnx
