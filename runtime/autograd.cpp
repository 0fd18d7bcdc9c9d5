// The autograd engine, recording: nodes, grad mode, and the graph each op's record() builds (leaf
// accumulators made on first use). The backward pass: autograd_execute.cpp.
#include "runtime/autograd.h"

#include <atomic>
#include <memory>

#include "runtime/autograd_engine.h"
#include "runtime/autograd_nodes.h"
#include "runtime/tensor_impl.h"

namespace tandem {

using autograd_detail::AccumulateGrad;
using autograd_detail::LeafCast;
using autograd_detail::meta_of;

namespace {
std::atomic<uint64_t> g_next_sequence{0};
thread_local bool t_grad_enabled = true;

std::shared_ptr<Node> accumulator_of(const Tensor& leaf) {
  auto* impl = leaf.impl();
  auto acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(leaf);
    impl->grad_accumulator = acc;
  }
  return acc;
}
}  // namespace

Node::Node(std::string name, std::vector<Edge> next_edges, std::vector<TensorMeta> inputs,
           std::vector<TensorMeta> outputs)
    : seq_(g_next_sequence.fetch_add(1)),
      name_(std::move(name)),
      next_edges_(std::move(next_edges)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)) {}

FunctionNode::FunctionNode(std::string name, std::vector<Edge> next, std::vector<TensorMeta> inputs,
                           std::vector<TensorMeta> outputs, BackwardFn fn)
    : Node(std::move(name), std::move(next), std::move(inputs), std::move(outputs)), fn_(std::move(fn)) {}

std::vector<Tensor> FunctionNode::apply(const std::vector<Tensor>& grad_outputs) {
  TANDEM_CHECK(fn_ != nullptr,
               "Trying to backward through the graph a second time (node {}): its saved tensors were freed "
               "after the first backward. Pass retain_graph=true to the first backward if you need to "
               "backward twice.",
               name());
  return fn_(grad_outputs);
}

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.impl()->output_nr};
  return {accumulator_of(t), 0};
}

namespace {
// A node of type N (its constructor's arguments after the metadata: `extra`) with edges to `inputs`,
// made the grad_fn of `outputs`' floating tensors.
template <class N, class... Extra>
std::vector<Tensor> attach_node(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                Extra&&... extra) {
  std::vector<Edge> edges;
  std::vector<TensorMeta> in_meta, out_meta;
  for (const Tensor& t : inputs) {
    edges.push_back(gradient_edge(t));
    in_meta.push_back(t.defined() ? meta_of(t) : TensorMeta{});
  }
  for (const Tensor& t : outputs) out_meta.push_back(meta_of(t));
  auto node = std::make_shared<N>(name, std::move(edges), std::move(in_meta), std::move(out_meta),
                                  std::forward<Extra>(extra)...);
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* impl = outputs[i].impl();
    if (!is_floating(impl->dtype)) continue;  // integer outputs (argmax indices) carry no gradient
    impl->requires_grad = true;
    impl->grad_fn = node;
    impl->output_nr = static_cast<int>(i);
  }
  return outputs;
}
}  // namespace

std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                           BackwardFn backward) {
  if (!needs_grad(inputs)) return outputs;
  return attach_node<FunctionNode>(name, inputs, std::move(outputs), std::move(backward));
}

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn backward) {
  return record(name, inputs, std::vector<Tensor>{std::move(output)}, std::move(backward))[0];
}

Tensor record_leaf_cast(const Tensor& leaf, Tensor out) {
  if (!needs_grad({&leaf})) return out;
  TANDEM_CHECK(leaf.is_leaf() && is_floating(out.dtype()) && out.shape() == leaf.shape(),
               "record_leaf_cast: needs a leaf and a floating copy of its shape");
  return attach_node<LeafCast>("AutocastCast", {leaf}, {std::move(out)})[0];
}

}  // namespace tandem
