// GraphBuilder: writes an ONNX model (opset 17, default domain) node by node, for the exporters of
// tandem's own models (export_sequential.cpp, export_gpt.cpp). It names values and nodes, keeps the
// protobuf classes out of the exporters, and checks the result with the ONNX library's checker
// before handing out its bytes. Internal (not installed).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::nn::onnx {

// One node attribute.
struct Attr {
  enum class Kind { Int, Float, Ints };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;

  static Attr integer(std::string name, int64_t v) { return {std::move(name), Kind::Int, v, 0, {}}; }
  static Attr real(std::string name, double v) { return {std::move(name), Kind::Float, 0, v, {}}; }
  static Attr integers(std::string name, std::vector<int64_t> v) {
    return {std::move(name), Kind::Ints, 0, 0, std::move(v)};
  }
};

// A dim of a graph input or output: a size, a name ("batch") for one that varies, or neither (a size
// the exporter does not know, e.g. after a Flatten of named dims).
struct Dim {
  int64_t size = -1;
  std::string name;  // used where size < 0
  static Dim of(int64_t size) { return {size, ""}; }
  static Dim named(std::string name) { return {-1, std::move(name)}; }
};

class GraphBuilder {
 public:
  static constexpr int64_t kOpset = 17;  // LayerNormalization's first opset

  // `source` names the model in messages ("model Sequential").
  explicit GraphBuilder(std::string source);
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  const std::string& source() const { return source_; }
  void input(const std::string& name, DType dtype, const std::vector<Dim>& dims);
  void output(const std::string& name, DType dtype, const std::vector<Dim>& dims);
  // A weight or statistic under its tandem name (written as f32, from any device and float dtype).
  // Returns the name.
  std::string initializer(const std::string& name, const Tensor& t);

  // The scope that names the next nodes and their values ("h.0.attn": "h.0.attn/MatMul_3"), so that a
  // node in onnxruntime's or netron's view says which module it comes from.
  void set_scope(std::string scope) { scope_ = std::move(scope); }
  // A node of `op` reading `inputs` ("" for an omitted optional one); returns its `outputs` fresh
  // value names.
  std::vector<std::string> node(const std::string& op, const std::vector<std::string>& inputs, size_t outputs,
                                const std::vector<Attr>& attrs = {});
  // The same for a node with one output; returns its name.
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const std::vector<Attr>& attrs = {});
  // The same with the output named `out` (a graph output).
  void op_into(const std::string& out, const std::string& op, const std::vector<std::string>& inputs,
               const std::vector<Attr>& attrs = {});

  // Constant nodes (not initializers: tandem's importer would take a float initializer for a weight).
  std::string constant(const Tensor& t);                  // f32 or i64, any shape
  std::string constant_ints(const std::vector<int64_t>& v);  // i64 [n]
  std::string constant_scalar(float v);                    // f32 []

  // The model, checked (onnx::checker): its serialised bytes. ValueError naming the source where the
  // checker refuses it (an exporter's bug) or it does not serialise.
  std::string finish();

 private:
  struct Proto;  // onnx::ModelProto, kept out of this header
  std::string fresh(const std::string& what);
  // Appends a node; returns its onnx::NodeProto* (void* here: no protobuf in this header).
  void* add(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<Attr>& attrs, const std::string& name);

  std::string source_;
  std::string scope_;
  int64_t counter_ = 0;
  std::unique_ptr<Proto> proto_;
};

}  // namespace tandem::nn::onnx
