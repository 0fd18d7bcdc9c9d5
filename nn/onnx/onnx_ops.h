// The ONNX ops tandem runs, each on tandem's differentiable ops (so backward comes with them), and
// the values they pass: tensors, or small integer tensors known on the host (shapes, axes, the
// output of Shape) that shape arithmetic works on without touching a device. Internal.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/onnx/onnx_graph.h"
#include "runtime/ops/norm.h"
#include "runtime/tensor.h"

namespace tandem::nn::onnx {

// A value of the graph: a tensor, or (host) integers with their shape.
struct Value {
  Tensor t;
  bool host = false;
  std::vector<int64_t> ints;  // host: the values, row-major
  Shape shape;                // host: their shape ([] for a scalar)

  static Value of(Tensor t) { return Value{std::move(t), false, {}, {}}; }
  static Value of_ints(std::vector<int64_t> v, Shape s) { return Value{Tensor(), true, std::move(v), std::move(s)}; }
  bool defined() const { return host || t.defined(); }
  Shape dims() const { return host ? shape : t.shape(); }
  // The tensor (host integers become an i64 tensor on `device`).
  Tensor tensor(Device device) const;
  // The integers (a tensor is read back: shape inputs that came from the device).
  std::vector<int64_t> integers() const;
  // The elements as doubles, integers and booleans alike (a tensor is read back): what the
  // comparisons and casts on host values read.
  std::vector<double> numbers() const;
};

// One node's run: its inputs (nullptr for an omitted optional one), the mode and the helpers ops use.
struct OpCall {
  const Node& node;
  const Graph& graph;
  std::vector<const Value*> in;
  bool training = true;
  Device device = kCPU;  // where the model's tensors live
  // BatchNormalization: the Relu (and MaxPool) after it that run inside it (OnnxModel's fusion; the
  // same values bit for bit, as nn::Sequential's fused cnn).
  const ops::BatchNormEpilogue* epilogue = nullptr;

  const Value& input(size_t i) const;   // a present input, or an error naming the node
  Tensor tensor(size_t i) const;        // input(i) as a tensor on `device` (host integers copied there)
  bool has_input(size_t i) const { return i < in.size() && in[i] != nullptr && in[i]->defined(); }
  int64_t attr_int(const std::string& name, int64_t otherwise) const;
  double attr_float(const std::string& name, double otherwise) const;
  std::string attr_string(const std::string& name, const std::string& otherwise) const;
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& otherwise = {}) const;
  const Tensor* attr_tensor(const std::string& name) const;
  [[noreturn]] void fail(const std::string& what) const;  // ValueError "<file>: node '<n>' (<op>): <what>"
};

using OpFn = std::vector<Value> (*)(const OpCall& call);

struct OpEntry {
  const char* op;
  int64_t since;  // the first opset whose semantics the function implements
  OpFn fn;
};

// The function for `op` at `opset`, or nullptr.
OpFn find_op(const std::string& op, int64_t opset);
// GELU: what OnnxModel runs in place of the Erf pattern of an exact GELU.
OpFn gelu_op();

// Whether a gradient can flow into `node`'s input `input` from its outputs: false for booleans,
// shapes, indices and the like. An initializer no output's gradient reaches is not trained (a causal
// mask buffer that only feeds an Equal is a constant, not a weight).
bool carries_gradient(const Node& node, size_t input);

// The op types tandem runs, sorted (docs/onnx.md lists them; errors name them).
std::vector<std::string> supported_ops();

}  // namespace tandem::nn::onnx
