// OnnxModel: the graph checked at load, its initializers registered, its nodes run per forward.
#include "nn/onnx/onnx_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "nn/onnx/onnx_graph.h"
#include "nn/onnx/onnx_ops.h"
#include "runtime/error.h"
#include "runtime/serialization/atomic_file.h"

namespace tandem::nn::onnx {

namespace {

bool matches(const std::string& name, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '.') return name.rfind(pattern, 0) == 0;
  return name == pattern;
}

int readers_of(const std::unordered_map<std::string, int>& readers, const std::string& value) {
  auto it = readers.find(value);
  return it == readers.end() ? 0 : it->second;
}

// The one node reading `value` (and nothing else does, not even the graph's outputs), if it is an `op`.
int sole_reader(const Graph& g, const std::unordered_map<std::string, int>& readers, const std::string& value,
                const char* op) {
  if (readers_of(readers, value) != 1) return -1;
  for (size_t j = 0; j < g.nodes.size(); ++j)
    for (const std::string& in : g.nodes[j].inputs)
      if (in == value) return g.nodes[j].op == op ? static_cast<int>(j) : -1;
  return -1;
}

// The values a gradient can reach from the graph's outputs: back from each output, through every
// node input that carries one (onnx_ops.h's carries_gradient). ONNX lists nodes in topological order,
// so one pass from the last node back suffices.
std::set<std::string> reached_by_gradients(const Graph& g) {
  std::set<std::string> reached;
  for (const ValueInfo& o : g.outputs) reached.insert(o.name);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    const bool feeds = std::any_of(n.outputs.begin(), n.outputs.end(),
                                   [&](const std::string& o) { return !o.empty() && reached.count(o); });
    if (!feeds) continue;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (!n.inputs[k].empty() && carries_gradient(n, k)) reached.insert(n.inputs[k]);
  }
  return reached;
}

}  // namespace

OnnxModel::OnnxModel(const std::string& path, const ImportOptions& options) : OnnxModel(read_graph(path), options) {}

std::shared_ptr<OnnxModel> OnnxModel::from_bytes(const std::string& bytes, const std::string& source,
                                                 const ImportOptions& options) {
  return std::shared_ptr<OnnxModel>(new OnnxModel(read_graph_bytes(bytes, source), options));
}

OnnxModel::OnnxModel(Graph graph, const ImportOptions& options)
    : graph_(std::make_shared<const Graph>(std::move(graph))) {
  const Graph& g = *graph_;
  const std::string& path = g.path;
  // Every node's op must run at the graph's opset: checked before anything else is built.
  plan_.resize(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    plan_[i] = {find_op(n.op, g.opset), n.inputs, n.outputs, false, {}};
    if (plan_[i].fn == nullptr)
      throw ValueError(fmt::format("{}: node '{}': op {} (opset {}) is not supported by tandem; it runs {}", path,
                                   n.name, n.op, g.opset, fmt::join(supported_ops(), ", ")));
  }
  // BatchNormalization's inputs 3 and 4 are running statistics: state, not weights.
  std::set<std::string> statistics;
  for (const Node& n : g.nodes)
    if (n.op == "BatchNormalization")
      for (size_t i = 3; i < n.inputs.size() && i < 5; ++i) statistics.insert(n.inputs[i]);
  for (const std::string& f : options.frozen) {
    bool found = false;
    for (const auto& [name, t] : g.initializers) found = found || matches(name, f);
    TANDEM_CHECK(found, "{}: frozen '{}' names no initializer of the model (a prefix ends with '.')", path, f);
  }
  const std::set<std::string> trainable = reached_by_gradients(g);
  for (const auto& [name, t] : g.initializers) {
    bool frozen = false;
    for (const std::string& f : options.frozen) frozen = frozen || matches(name, f);
    // The exporter names folded constants "onnx::<op>_<n>": values of the graph, not weights. A float
    // buffer no output's gradient reaches (nanoGPT's causal mask `bias`, read by an Equal) is constant.
    const bool weight = is_floating(t.dtype()) && !statistics.count(name) && !frozen && name.rfind("onnx::", 0) != 0 &&
                        trainable.count(name);
    if (weight)
      register_parameter(name, t);
    else
      register_buffer(name, t);
  }
  index_state();
  ReaderCounts readers;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs) ++readers[in];
  for (const ValueInfo& o : g.outputs) readers[o.name] += 2;
  fuse_batchnorm_epilogues(readers);
  fuse_gelu(readers);
}

void OnnxModel::fuse_gelu(const ReaderCounts& readers) {
  const Graph& g = *graph_;
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  // A scalar the graph knows at load: a Constant's value or a one-element initializer.
  auto scalar = [&](const std::string& name, double want) {
    const Tensor* t = nullptr;
    if (auto it = producer.find(name); it != producer.end()) {
      const Node& n = g.nodes[it->second];
      auto a = n.attributes.find("value");
      if (n.op == "Constant" && a != n.attributes.end() && a->second.kind == Attribute::Kind::Tensor) t = &a->second.t;
    }
    for (const auto& [iname, init] : g.initializers)
      if (iname == name) t = &init;
    if (t == nullptr || t->numel() != 1 || !is_floating(t->dtype())) return false;
    return std::fabs(t->to_vector<double>()[0] - want) <= 1e-6 * std::fabs(want);
  };
  auto reader = [&](const std::string& value, const char* op) { return sole_reader(g, readers, value, op); };
  // The input of a binary node that is not `other`.
  auto other_input = [](const Node& n, const std::string& other) -> std::string {
    if (n.inputs.size() != 2) return "";
    return n.inputs[0] == other ? n.inputs[1] : n.inputs[1] == other ? n.inputs[0] : "";
  };
  for (size_t e = 0; e < g.nodes.size(); ++e) {
    const Node& erf = g.nodes[e];
    if (erf.op != "Erf" || erf.inputs.size() != 1) continue;
    auto div_at = producer.find(erf.inputs[0]);
    if (div_at == producer.end()) continue;
    const Node& div = g.nodes[div_at->second];
    if (div.op != "Div" || div.inputs.size() != 2 || !scalar(div.inputs[1], std::sqrt(2.0)) ||
        readers_of(readers, div.outputs[0]) != 1)
      continue;
    const std::string x = div.inputs[0];
    const int add = reader(erf.outputs[0], "Add");
    if (add < 0 || !scalar(other_input(g.nodes[static_cast<size_t>(add)], erf.outputs[0]), 1.0)) continue;
    const std::string& sum = g.nodes[static_cast<size_t>(add)].outputs[0];
    const int mul_x = reader(sum, "Mul");
    if (mul_x < 0 || other_input(g.nodes[static_cast<size_t>(mul_x)], sum) != x) continue;
    const std::string& prod = g.nodes[static_cast<size_t>(mul_x)].outputs[0];
    const int half = reader(prod, "Mul");
    if (half < 0 || !scalar(other_input(g.nodes[static_cast<size_t>(half)], prod), 0.5)) continue;
    for (size_t folded : {div_at->second, e, static_cast<size_t>(add), static_cast<size_t>(mul_x)})
      plan_[folded].fn = nullptr;
    NodePlan& last = plan_[static_cast<size_t>(half)];
    last.fn = gelu_op();
    last.inputs = {x};
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == "Erf" && plan_[i].fn != nullptr)
      throw ValueError(fmt::format("{}: node '{}': Erf outside a GELU (x * 0.5 * (1 + erf(x / sqrt(2)))) is not "
                                   "supported", g.path, g.nodes[i].name));
}

void OnnxModel::fuse_batchnorm_epilogues(const ReaderCounts& readers) {
  const Graph& g = *graph_;
  auto ints = [](const Node& n, const char* name, std::vector<int64_t> otherwise) {
    auto it = n.attributes.find(name);
    return it == n.attributes.end() || it->second.kind != Attribute::Kind::Ints ? otherwise : it->second.ints;
  };
  auto int_attr = [](const Node& n, const char* name) {
    auto it = n.attributes.find(name);
    return it == n.attributes.end() ? 0 : it->second.i;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.outputs.empty()) continue;
    bool stats_read = false;  // a training export's extra outputs, if anything reads them
    for (size_t k = 1; k < bn.outputs.size(); ++k)
      stats_read = stats_read || (!bn.outputs[k].empty() && readers_of(readers, bn.outputs[k]) > 0);
    const int relu = stats_read ? -1 : sole_reader(g, readers, bn.outputs[0], "Relu");
    if (relu < 0) continue;
    NodePlan& f = plan_[i];
    f.has_epilogue = true;
    f.epilogue.relu = true;
    f.outputs[0] = g.nodes[static_cast<size_t>(relu)].outputs[0];
    plan_[static_cast<size_t>(relu)].fn = nullptr;
    const int pool = sole_reader(g, readers, f.outputs[0], "MaxPool");
    if (pool < 0) continue;
    const Node& p = g.nodes[static_cast<size_t>(pool)];
    const std::vector<int64_t> k = ints(p, "kernel_shape", {}), s = ints(p, "strides", {1, 1}),
                               pads = ints(p, "pads", {0, 0, 0, 0}), d = ints(p, "dilations", {1, 1});
    const bool plain = k.size() == 2 && k[0] >= 1 && k[1] >= 1 && s.size() == 2 && s[0] >= 1 && s[1] >= 1 &&
                       pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3] && pads[0] >= 0 && pads[1] >= 0 &&
                       d == std::vector<int64_t>{1, 1} && int_attr(p, "ceil_mode") == 0 &&
                       int_attr(p, "storage_order") == 0 && p.outputs.size() == 1 &&
                       (p.attributes.count("auto_pad") == 0 || p.attributes.at("auto_pad").s == "NOTSET");
    if (!plain) continue;  // the MaxPool runs as its own node (and says what it refuses)
    f.epilogue.max_pool = true;
    f.epilogue.pool_kernel = {k[0], k[1]};
    f.epilogue.pool_stride = {s[0], s[1]};
    f.epilogue.pool_padding = {pads[0], pads[1]};
    f.outputs[0] = p.outputs[0];
    plan_[static_cast<size_t>(pool)].fn = nullptr;
  }
}

void OnnxModel::index_state() {
  state_.clear();
  for (auto& [name, t] : params_) state_[name] = t;
  for (auto& [name, t] : buffers_) state_[name] = t;
}

void OnnxModel::save_onnx(const std::string& path) const {
  serialization::write_file_atomic(path, write_graph_with(*graph_, state_dict()));
}

size_t OnnxModel::num_inputs() const { return graph_->inputs.size(); }
size_t OnnxModel::num_outputs() const { return graph_->outputs.size(); }

std::vector<OnnxModel::TensorSpec> OnnxModel::inputs() const {
  std::vector<TensorSpec> out;
  for (const ValueInfo& v : graph_->inputs) out.push_back({v.name, v.dtype, v.dims});
  return out;
}

std::vector<OnnxModel::TensorSpec> OnnxModel::outputs() const {
  std::vector<TensorSpec> out;
  for (const ValueInfo& v : graph_->outputs) out.push_back({v.name, v.dtype, v.dims});
  return out;
}

std::shared_ptr<Module> OnnxModel::clone() const {
  std::shared_ptr<OnnxModel> copy(new OnnxModel(*this));
  copy->deep_copy_state();
  copy->index_state();  // onto the copy's tensors, not the original's
  return copy;
}

Tensor OnnxModel::forward(const Tensor& x) {
  TANDEM_CHECK(num_inputs() == 1 && num_outputs() == 1,
               "{}: the model has {} inputs and {} outputs; call forward_many", graph_->path, num_inputs(),
               num_outputs());
  return forward_many({x})[0];
}

std::vector<Tensor> OnnxModel::forward_many(const std::vector<Tensor>& inputs) {
  const Graph& g = *graph_;
  TANDEM_CHECK(inputs.size() == g.inputs.size(), "{}: the model takes {} input{}, got {}", g.path, g.inputs.size(),
               g.inputs.size() == 1 ? "" : "s", inputs.size());
  Device device = inputs.empty() ? kCPU : inputs[0].device();
  std::unordered_map<std::string, Value> env;
  env.reserve(state_.size() + g.nodes.size() * 2 + inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& want = g.inputs[i];
    const Tensor& x = inputs[i];
    TANDEM_CHECK(x.defined(), "{}: input {} ('{}') is undefined", g.path, i, want.name);
    bool fits = want.dims.empty() || x.dim() == static_cast<int64_t>(want.dims.size());
    for (size_t d = 1; fits && d < want.dims.size(); ++d)  // dim 0 is the batch, whatever the export said
      fits = want.dims[d] < 0 || want.dims[d] == x.size(static_cast<int64_t>(d));
    TANDEM_CHECK(fits, "{}: input '{}' has shape {}; the model takes [{}] (-1: any)", g.path, want.name,
                 shape_str(x.shape()), fmt::join(want.dims, ", "));
    TANDEM_CHECK(x.dtype() == want.dtype, "{}: input '{}' is {}; the model takes {}", g.path, want.name,
                 dtype_name(x.dtype()), dtype_name(want.dtype));
    env[want.name] = Value::of(x);
  }
  for (const auto& [name, t] : state_) {
    // Small integer initializers (shapes, axes) are host values for the shape arithmetic.
    if (t.dtype() == DType::i64 && t.numel() <= 1024)
      env[name] = Value::of_ints(t.to(kCPU).to_vector<int64_t>(), t.shape());
    else
      env[name] = Value::of(t);
  }
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    const NodePlan& plan = plan_[idx];
    if (plan.fn == nullptr) continue;  // runs inside the node its value feeds (a fusion)
    OpCall call{g.nodes[idx], g, {}, is_training(), device};
    if (plan.has_epilogue) call.epilogue = &plan.epilogue;
    for (const std::string& in : plan.inputs) {
      if (in.empty()) {
        call.in.push_back(nullptr);
        continue;
      }
      auto it = env.find(in);
      if (it == env.end()) call.fail(fmt::format("its input '{}' is computed by no earlier node", in));
      call.in.push_back(&it->second);
    }
    std::vector<Value> out = plan.fn(call);
    for (size_t k = 0; k < plan.outputs.size() && k < out.size(); ++k)
      if (!plan.outputs[k].empty()) env[plan.outputs[k]] = std::move(out[k]);
  }
  std::vector<Tensor> outputs;
  for (const ValueInfo& o : g.outputs) {
    auto it = env.find(o.name);
    TANDEM_CHECK(it != env.end(), "{}: output '{}' is computed by no node", g.path, o.name);
    outputs.push_back(it->second.tensor(device));
  }
  return outputs;
}

}  // namespace tandem::nn::onnx
