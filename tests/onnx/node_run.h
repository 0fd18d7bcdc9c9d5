// One ONNX node run by its op function, outside any file: the ops' tests build the node, its
// attributes and its input values by hand (onnx_op_parts.h is internal to nn/onnx).
#pragma once
#include <string>
#include <vector>

#include "nn/onnx/onnx_op_parts.h"
#include "runtime/error.h"

namespace tandem::testing {

// One node of a graph "node.onnx" at opset 13, with its inputs, run by `fn`.
struct NodeRun {
  nn::onnx::Graph graph;
  nn::onnx::Node node;
  std::vector<nn::onnx::Value> values;

  NodeRun(const std::string& op, std::vector<nn::onnx::Value> in) : values(std::move(in)) {
    graph.path = "node.onnx";
    graph.opset = 13;
    node.name = "n";
    node.op = op;
  }
  void ints(const std::string& name, std::vector<int64_t> v) {
    nn::onnx::Attribute& a = node.attributes[name];
    a.kind = nn::onnx::Attribute::Kind::Ints;
    a.ints = std::move(v);
  }
  void integer(const std::string& name, int64_t v) {
    nn::onnx::Attribute& a = node.attributes[name];
    a.kind = nn::onnx::Attribute::Kind::Int;
    a.i = v;
  }
  // The first output as a Value (a tensor or host integers).
  nn::onnx::Value value(std::vector<nn::onnx::Value> (*fn)(const nn::onnx::OpCall&)) {
    nn::onnx::OpCall call{node, graph, {}};
    for (const nn::onnx::Value& v : values) call.in.push_back(v.defined() ? &v : nullptr);
    return fn(call)[0];
  }
  Tensor run(std::vector<nn::onnx::Value> (*fn)(const nn::onnx::OpCall&)) { return value(fn).t; }
};

inline std::string error_of(NodeRun& n, std::vector<nn::onnx::Value> (*fn)(const nn::onnx::OpCall&)) {
  try {
    n.run(fn);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}


}  // namespace tandem::testing
