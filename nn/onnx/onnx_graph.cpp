// ModelProto -> Graph with Debian's ONNX library (protobuf parsing and the checker).
#include "nn/onnx/onnx_graph.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::onnx {

namespace {

namespace pb = ::onnx;

// tandem's dtype for an ONNX element type; bool is read as u8 (0/1), as a mask tensor is.
bool dtype_of(int32_t elem, DType& out) {
  switch (elem) {
    case pb::TensorProto_DataType_FLOAT: out = DType::f32; return true;
    case pb::TensorProto_DataType_DOUBLE: out = DType::f64; return true;
    case pb::TensorProto_DataType_FLOAT16: out = DType::f16; return true;
    case pb::TensorProto_DataType_BFLOAT16: out = DType::bf16; return true;
    case pb::TensorProto_DataType_INT32: out = DType::i32; return true;
    case pb::TensorProto_DataType_INT64: out = DType::i64; return true;
    case pb::TensorProto_DataType_UINT8:
    case pb::TensorProto_DataType_BOOL: out = DType::u8; return true;
    default: return false;
  }
}

const char* elem_name(int32_t elem) {
  return pb::TensorProto_DataType_IsValid(elem) ? pb::TensorProto_DataType_Name(elem).c_str() : "unknown";
}

// The tensor's bytes, from raw_data or the typed repeated field the standard puts it in.
Tensor to_tensor(const pb::TensorProto& t, const std::string& path) {
  DType dtype;
  TANDEM_CHECK(dtype_of(t.data_type(), dtype), "{}: tensor '{}' has element type {}, which tandem does not read",
               path, t.name(), elem_name(t.data_type()));
  TANDEM_CHECK(t.data_location() != pb::TensorProto_DataLocation_EXTERNAL,
               "{}: tensor '{}' keeps its data in an external file, which tandem does not read; export with the "
               "weights inside the model (under 2 GB)", path, t.name());
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape) TANDEM_CHECK(d >= 0, "{}: tensor '{}' has a negative dimension", path, t.name());
  Tensor out = Tensor::zeros(shape, dtype);
  const size_t n = static_cast<size_t>(out.numel()), bytes = n * dtype_size(dtype);
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  auto need = [&](size_t have, const char* field) {
    TANDEM_CHECK(have == n, "{}: tensor '{}' of shape {} holds {} values in {}", path, t.name(), shape_str(shape),
                 have, field);
  };
  if (t.has_raw_data()) {
    TANDEM_CHECK(t.raw_data().size() == bytes, "{}: tensor '{}' of shape {} has {} bytes of data, not {}", path,
                 t.name(), shape_str(shape), t.raw_data().size(), bytes);
    if (bytes > 0) std::memcpy(dst, t.raw_data().data(), bytes);  // little-endian, as the standard says
    return out;
  }
  switch (dtype) {
    case DType::f32:
      need(static_cast<size_t>(t.float_data_size()), "float_data");
      if (n) std::memcpy(dst, t.float_data().data(), bytes);
      break;
    case DType::f64:
      need(static_cast<size_t>(t.double_data_size()), "double_data");
      if (n) std::memcpy(dst, t.double_data().data(), bytes);
      break;
    case DType::i64:
      need(static_cast<size_t>(t.int64_data_size()), "int64_data");
      if (n) std::memcpy(dst, t.int64_data().data(), bytes);
      break;
    default: {  // i32, u8/bool, f16, bf16: int32_data, one element per entry (16-bit types as their bits)
      need(static_cast<size_t>(t.int32_data_size()), "int32_data");
      for (size_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (dtype == DType::i32) std::memcpy(dst + 4 * i, &v, 4);
        else if (dtype == DType::u8) dst[i] = static_cast<uint8_t>(v);
        else { const uint16_t b = static_cast<uint16_t>(v); std::memcpy(dst + 2 * i, &b, 2); }
      }
    }
  }
  return out;
}

ValueInfo value_info(const pb::ValueInfoProto& v, const std::string& path) {
  ValueInfo out;
  out.name = v.name();
  TANDEM_CHECK(v.type().has_tensor_type(), "{}: graph input or output '{}' is not a tensor (sequences and maps are "
               "not supported)", path, v.name());
  const auto& tt = v.type().tensor_type();
  TANDEM_CHECK(dtype_of(tt.elem_type(), out.dtype), "{}: graph input or output '{}' has element type {}, which tandem "
               "does not read", path, v.name(), elem_name(tt.elem_type()));
  if (tt.has_shape())
    for (const auto& d : tt.shape().dim()) out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return out;
}

Attribute attribute(const pb::AttributeProto& a, const std::string& path) {
  Attribute out;
  switch (a.type()) {
    case pb::AttributeProto_AttributeType_INT: out.kind = Attribute::Kind::Int; out.i = a.i(); break;
    case pb::AttributeProto_AttributeType_FLOAT: out.kind = Attribute::Kind::Float; out.f = a.f(); break;
    case pb::AttributeProto_AttributeType_STRING: out.kind = Attribute::Kind::String; out.s = a.s(); break;
    case pb::AttributeProto_AttributeType_INTS:
      out.kind = Attribute::Kind::Ints;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case pb::AttributeProto_AttributeType_FLOATS:
      out.kind = Attribute::Kind::Floats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case pb::AttributeProto_AttributeType_TENSOR:
      out.kind = Attribute::Kind::Tensor;
      out.t = to_tensor(a.t(), path);
      break;
    default: out.kind = Attribute::Kind::Other;  // graphs, sparse tensors: the op that reads it says so
  }
  return out;
}

}  // namespace

Graph read_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open the ONNX model: {}", path, std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TANDEM_CHECK_KIND(IO, !in.bad(), "{}: cannot read the ONNX model", path);
  return read_graph_bytes(std::move(bytes), path);
}

Graph read_graph_bytes(std::string bytes, const std::string& path) {
  pb::ModelProto model;
  TANDEM_CHECK(model.ParseFromString(bytes), "{}: not an ONNX model (the protobuf does not parse)", path);
  auto kept = std::make_shared<const std::string>(std::move(bytes));  // moved, not copied: a model can be GBs
  // The checker, not the library's shape inference: tandem checks shapes as it runs the ops, and
  // libonnx 1.12's inference divides by zero on some hostile files (convPoolShapeInference: a crash
  // the ONNX fuzzer found in seconds), so a file could end the process.
  try {
    pb::checker::check_model(model);
  } catch (const std::exception& e) {  // onnx::checker::ValidationError
    TANDEM_FAIL(Value, "{}: not a valid ONNX model: {}", path, e.what());
  }
  Graph g;
  g.path = path;
  g.bytes = std::move(kept);
  g.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") g.opset = o.version();
  }
  TANDEM_CHECK(g.opset > 0, "{}: the model imports no opset of the default ONNX domain", path);
  const pb::GraphProto& graph = model.graph();
  for (const auto& t : graph.initializer()) g.initializers.emplace_back(t.name(), to_tensor(t, path));
  TANDEM_CHECK(graph.sparse_initializer_size() == 0, "{}: sparse initializers are not supported", path);
  for (const auto& v : graph.input()) {
    bool initializer = false;  // older exports list initializers among the inputs too
    for (const auto& [name, t] : g.initializers) initializer = initializer || name == v.name();
    if (!initializer) g.inputs.push_back(value_info(v, path));
  }
  for (const auto& v : graph.output()) g.outputs.push_back(value_info(v, path));
  int index = 0;
  for (const auto& n : graph.node()) {
    Node node;
    node.op = n.op_type();
    node.name = n.name().empty() ? fmt::format("{} #{}", n.op_type(), index) : n.name();
    ++index;
    TANDEM_CHECK(n.domain().empty() || n.domain() == "ai.onnx",
                 "{}: node '{}' ({}) is in domain '{}'; tandem runs the default ONNX domain only", path, node.name,
                 node.op, n.domain());
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes[a.name()] = attribute(a, path);
    g.nodes.push_back(std::move(node));
  }
  return g;
}

std::string write_graph_with(const Graph& graph, const std::vector<std::pair<std::string, Tensor>>& values) {
  pb::ModelProto model;
  TANDEM_CHECK(graph.bytes && model.ParseFromString(*graph.bytes), "{}: the model's bytes are gone", graph.path);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : values) by_name[name] = &t;
  size_t written = 0;
  for (pb::TensorProto& init : *model.mutable_graph()->mutable_initializer()) {
    auto it = by_name.find(init.name());
    if (it == by_name.end()) continue;
    DType dtype;
    TANDEM_CHECK(dtype_of(init.data_type(), dtype), "{}: initializer '{}' has an element type tandem cannot write",
                 graph.path, init.name());
    const Shape shape(init.dims().begin(), init.dims().end());
    TANDEM_CHECK(it->second->shape() == shape, "{}: initializer '{}' is {} in the file, {} in the model", graph.path,
                 init.name(), shape_str(shape), shape_str(it->second->shape()));
    NoGradGuard no_grad;
    Tensor host = it->second->to(kCPU);
    if (host.dtype() != dtype) host = ops::cast(host, dtype);
    // raw_data only: the typed fields are cleared so that a reader does not see two values.
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.set_raw_data(std::string(static_cast<const char*>(host.data_ptr()), host.nbytes()));
    ++written;
  }
  TANDEM_CHECK(written == by_name.size(), "{}: {} of the {} tensors to write name no initializer of the file",
               graph.path, by_name.size() - written, by_name.size());
  std::string out;
  TANDEM_CHECK(model.SerializeToString(&out), "{}: the model does not serialise (over 2 GB?)", graph.path);
  return out;
}

}  // namespace tandem::nn::onnx
