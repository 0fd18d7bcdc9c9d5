// An ONNX model file as tandem reads it: the graph's inputs, outputs, initializers and nodes in
// plain C++ types, so that nothing past this reader includes protobuf. Read with Debian's ONNX
// library: its parser and its checker (onnx::checker::check_model).
// Internal (not installed).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::nn::onnx {

// One attribute of a node: the kind ONNX gives it and its value.
struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats, Tensor, Other };
  Kind kind = Kind::Other;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  Tensor t;  // on the CPU
};

struct Node {
  std::string name;  // the node's name, or "<op> #<index>" when the file gives none
  std::string op;    // op_type
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional input or output
  std::map<std::string, Attribute> attributes;
};

// A graph input or output: its element type and dims (-1 where the file gives a symbol or nothing).
struct ValueInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;
};

struct Graph {
  std::string path;     // the file, for messages
  int64_t opset = 0;    // of the default domain
  std::string producer; // producer_name and version, e.g. "pytorch 1.13.0"
  std::vector<ValueInfo> inputs;   // the graph's inputs that are not initializers, in order
  std::vector<ValueInfo> outputs;
  std::vector<std::pair<std::string, Tensor>> initializers;  // in file order, on the CPU
  std::vector<Node> nodes;         // topologically sorted (the checker insists)
  std::shared_ptr<const std::string> bytes;  // the file as read: written back with new initializers
};

// Reads and checks `path`. IOError for a file that cannot be read; ValueError "<path>: ..." for one
// that is not a valid ONNX model (the checker's message), uses a domain other than the default one,
// or holds a tensor type tandem has no dtype for.
Graph read_graph(const std::string& path);
// The same from the file's bytes (kept in the Graph for write_graph_with); `source` names it in messages.
Graph read_graph_bytes(std::string bytes, const std::string& source);

// The graph's file with each initializer named in `values` replaced by that tensor (same shape; its
// values converted to the initializer's element type), everything else as it was: the imported
// model with its trained weights and statistics, for other runtimes. ValueError for a name the file
// does not have or a shape that differs.
std::string write_graph_with(const Graph& graph, const std::vector<std::pair<std::string, Tensor>>& values);

}  // namespace tandem::nn::onnx
