// GraphBuilder over Debian's ONNX library (libonnx 1.12's protobuf classes and checker).
#include "nn/onnx/onnx_builder.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "runtime/autograd.h"
#include "runtime/error.h"
#include "tandem/version.h"

namespace tandem::nn::onnx {

namespace pb = ::onnx;

struct GraphBuilder::Proto {
  pb::ModelProto model;
};

namespace {

int32_t elem_of(DType dtype, const std::string& source, const std::string& name) {
  switch (dtype) {
    case DType::f32: return pb::TensorProto_DataType_FLOAT;
    case DType::i64: return pb::TensorProto_DataType_INT64;
    default: TANDEM_FAIL(Value, "{}: '{}' is {}; the exporter writes float32 and int64 only", source, name,
                         dtype_name(dtype));
  }
}

void value_info(pb::ValueInfoProto* v, const std::string& name, int32_t elem, const std::vector<Dim>& dims) {
  v->set_name(name);
  pb::TypeProto_Tensor* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  pb::TensorShapeProto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    pb::TensorShapeProto_Dimension* out = shape->add_dim();
    if (d.size >= 0)
      out->set_dim_value(d.size);
    else if (!d.name.empty())
      out->set_dim_param(d.name);  // else: a dim of no known size or name
  }
}

// `t` (CPU or device, any float dtype, or i64) as a TensorProto's raw data, little-endian as the
// standard says (tandem's hosts are).
void fill_tensor(pb::TensorProto* out, const std::string& name, const Tensor& t, const std::string& source) {
  out->set_name(name);
  for (int64_t d : t.shape()) out->add_dims(d);
  NoGradGuard no_grad;
  if (t.dtype() == DType::i64) {
    out->set_data_type(pb::TensorProto_DataType_INT64);
    const std::vector<int64_t> v = t.to_vector<int64_t>();
    out->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t)));
    return;
  }
  TANDEM_CHECK(is_floating(t.dtype()), "{}: tensor '{}' is {}; the exporter writes float tensors as float32",
               source, name, dtype_name(t.dtype()));
  out->set_data_type(pb::TensorProto_DataType_FLOAT);
  const std::vector<float> v = t.to_vector<float>();  // from any device and float dtype
  out->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

}  // namespace

GraphBuilder::GraphBuilder(std::string source) : source_(std::move(source)), proto_(std::make_unique<Proto>()) {
  pb::ModelProto& m = proto_->model;
  m.set_ir_version(pb::IR_VERSION);  // libonnx 1.12's: 8
  m.set_producer_name("tandem");
  m.set_producer_version(TANDEM_VERSION);
  pb::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  m.mutable_graph()->set_name("tandem");
}

GraphBuilder::~GraphBuilder() = default;

void GraphBuilder::input(const std::string& name, DType dtype, const std::vector<Dim>& dims) {
  value_info(proto_->model.mutable_graph()->add_input(), name, elem_of(dtype, source_, name), dims);
}

void GraphBuilder::output(const std::string& name, DType dtype, const std::vector<Dim>& dims) {
  value_info(proto_->model.mutable_graph()->add_output(), name, elem_of(dtype, source_, name), dims);
}

std::string GraphBuilder::initializer(const std::string& name, const Tensor& t) {
  fill_tensor(proto_->model.mutable_graph()->add_initializer(), name, t, source_);
  return name;
}

std::string GraphBuilder::fresh(const std::string& what) {
  return fmt::format("{}{}{}_{}", scope_, scope_.empty() ? "" : "/", what, counter_++);
}

void* GraphBuilder::add(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::vector<Attr>& attrs,
                        const std::string& name) {
  pb::NodeProto* n = proto_->model.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  for (const Attr& a : attrs) {
    pb::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case Attr::Kind::Int:
        p->set_type(pb::AttributeProto_AttributeType_INT);
        p->set_i(a.i);
        break;
      case Attr::Kind::Float:
        p->set_type(pb::AttributeProto_AttributeType_FLOAT);
        p->set_f(static_cast<float>(a.f));
        break;
      case Attr::Kind::Ints:
        p->set_type(pb::AttributeProto_AttributeType_INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
    }
  }
  return n;
}

std::vector<std::string> GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                                            size_t outputs, const std::vector<Attr>& attrs) {
  const std::string name = fresh(op);
  std::vector<std::string> out;
  for (size_t k = 0; k < outputs; ++k) out.push_back(fmt::format("{}:{}", name, k));
  add(op, inputs, out, attrs, name);
  return out;
}

std::string GraphBuilder::op(const std::string& op, const std::vector<std::string>& inputs,
                             const std::vector<Attr>& attrs) {
  return node(op, inputs, 1, attrs)[0];
}

void GraphBuilder::op_into(const std::string& out, const std::string& op, const std::vector<std::string>& inputs,
                           const std::vector<Attr>& attrs) {
  add(op, inputs, {out}, attrs, fresh(op));
}

std::string GraphBuilder::constant(const Tensor& t) {
  const std::string name = fresh("Constant");
  const std::string out = name + ":0";
  auto* n = static_cast<pb::NodeProto*>(add("Constant", {}, {out}, {}, name));
  pb::AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(pb::AttributeProto_AttributeType_TENSOR);
  fill_tensor(a->mutable_t(), out, t, source_);
  return out;
}

std::string GraphBuilder::constant_ints(const std::vector<int64_t>& v) {
  return constant(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::i64));
}

std::string GraphBuilder::constant_scalar(float v) { return constant(Tensor::from_vector<float>({v}, {}, DType::f32)); }

std::string GraphBuilder::finish() {
  try {
    pb::checker::check_model(proto_->model);
  } catch (const std::exception& e) {  // onnx::checker::ValidationError: a graph this exporter got wrong
    TANDEM_FAIL(Internal, "{}: the exported ONNX graph does not pass the ONNX checker: {}", source_, e.what());
  }
  std::string bytes;
  TANDEM_CHECK(proto_->model.SerializeToString(&bytes), "{}: the exported ONNX model does not serialise (over 2 GB?)",
               source_);
  return bytes;
}

}  // namespace tandem::nn::onnx
