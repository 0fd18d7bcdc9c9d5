// The autograd engine, the backward pass: dependencies counted from the roots, ready nodes run newest
// first (leaf accumulators as soon as they are ready), gradients summed per node input, and the sinks
// a running backward may add its gradients into in place. Recording: autograd.cpp.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/autograd_nodes.h"
#include "runtime/backend/core.h"
#include "runtime/backend/elementwise.h"
#include "runtime/env_settings.h"

namespace tandem {

using autograd_detail::AccumulateGrad;
using autograd_detail::in_dtype;
using autograd_detail::LeafCast;

namespace {

// The gradients summed so far for the outputs of nodes still to run, by node (execute's buffers).
using GradientBuffers = std::unordered_map<Node*, std::vector<Tensor>>;

// The node whose apply is running on this thread under Tensor::backward (not grad()), the one
// gradient_sink answers for, and its backward's buffers (interior sinks).
thread_local Node* t_sink_node = nullptr;
thread_local GradientBuffers* t_sink_buffers = nullptr;

class SinkNodeScope {
 public:
  SinkNodeScope(Node* node, GradientBuffers* buffers) : prev_node_(t_sink_node), prev_buffers_(t_sink_buffers) {
    t_sink_node = node;
    t_sink_buffers = buffers;
  }
  ~SinkNodeScope() {
    t_sink_node = prev_node_;
    t_sink_buffers = prev_buffers_;
  }
  SinkNodeScope(const SinkNodeScope&) = delete;
  SinkNodeScope& operator=(const SinkNodeScope&) = delete;

 private:
  Node* prev_node_;
  GradientBuffers* prev_buffers_;
};

// The root gradients the running backward made itself (ones for a scalar root given none), for
// is_implicit_root_gradient; a nested backward (a checkpoint's recomputation) has its own. Held
// for the whole backward, so that no other tensor can take one's address.
thread_local const std::vector<Tensor>* t_implicit_roots = nullptr;

class ImplicitRootsScope {
 public:
  explicit ImplicitRootsScope(const std::vector<Tensor>* roots) : prev_(t_implicit_roots) { t_implicit_roots = roots; }
  ~ImplicitRootsScope() { t_implicit_roots = prev_; }
  ImplicitRootsScope(const ImplicitRootsScope&) = delete;
  ImplicitRootsScope& operator=(const ImplicitRootsScope&) = delete;

 private:
  const std::vector<Tensor>* prev_;
};
}  // namespace

namespace {
// TANDEM_GRAD_SINK: "off" offers no sinks (every gradient through its leaf's accumulation or the
// engine's sum), "leaves" only leaves' .grad, "on" (the default) both (A/B runs). Read once.
enum class SinkPolicy { kAll, kLeaves, kOff };
SinkPolicy sink_policy() {
  static const SinkPolicy policy = static_cast<SinkPolicy>(env::choice("TANDEM_GRAD_SINK"));
  return policy;
}

// The gradient summed so far for the output of edge.fn that edge feeds, where the running node
// may add its own into it in place; undefined when there is none or it is not the engine's alone.
Tensor interior_sink(const Edge& edge) {
  if (!t_sink_buffers) return {};
  auto it = t_sink_buffers->find(edge.fn.get());
  if (it == t_sink_buffers->end()) return {};
  const auto nr = static_cast<size_t>(edge.input_nr);
  if (nr >= it->second.size()) return {};
  const Tensor& slot = it->second[nr];
  if (!slot.defined()) return {};
  // Written in place only where nothing else can see it: the engine's reference is the only one to
  // the tensor and to its storage (no view of it, no other node's gradient, no caller's tensor).
  if (slot.impl_ptr().use_count() != 1 || slot.storage().use_count() != 1) return {};
  const TensorMeta& meta = edge.fn->output_meta()[nr];
  const bool usable = slot.dtype() == meta.dtype && slot.shape() == meta.shape && slot.device() == meta.device;
  return usable ? slot : Tensor();
}
}  // namespace

bool is_implicit_root_gradient(const Tensor& g) {
  if (!t_implicit_roots || !g.defined()) return false;
  return std::any_of(t_implicit_roots->begin(), t_implicit_roots->end(),
                     [&](const Tensor& root) { return root.impl() == g.impl(); });
}

Tensor gradient_sink(size_t input_index, SinkOf which) {
  Node* node = t_sink_node;
  if (sink_policy() == SinkPolicy::kOff || !node || input_index >= node->next_edges().size()) return {};
  const Edge& edge = node->next_edges()[input_index];
  Node* next = edge.fn.get();
  if (!next) return {};
  if (auto* cast = dynamic_cast<LeafCast*>(next)) next = cast->next_edges()[0].fn.get();
  // The sink has the leaf's shape and device, which are the input's: the input is the leaf or its
  // cast (record_leaf_cast checks the shape).
  if (auto* acc = dynamic_cast<AccumulateGrad*>(next)) return acc->sink();
  return which == SinkOf::AnyInput && sink_policy() == SinkPolicy::kAll ? interior_sink(edge) : Tensor();
}

namespace {

struct CaptureKey {
  Node* node;
  int slot;
  bool operator==(const CaptureKey& o) const { return node == o.node && slot == o.slot; }
};
struct CaptureHash {
  size_t operator()(const CaptureKey& k) const { return std::hash<Node*>()(k.node) ^ size_t(k.slot); }
};

// Sums gradients arriving at one input of a node, in that input's dtype (`dtype`): only a leaf's
// sink receives gradients narrower than that, and their sum is made wide.
void accumulate_into(Tensor& slot, const Tensor& g, DType dtype) {
  if (!slot.defined()) {
    slot = g;
  } else if (slot.dtype() == dtype && g.dtype() == dtype) {
    // One pass into a new tensor (never write into a gradient another node may still hold).
    Tensor sum = Tensor::empty(slot.shape(), dtype, slot.device());
    kernels::binary(sum.device())(kernels::BinaryOp::Add, slot, g, sum);
    slot = sum;
  } else {
    Tensor sum = in_dtype(slot, dtype);
    kernels::axpy(sum.device())(sum, g, 1.0);
    slot = sum;
  }
}

void check_gradient(const Node& producer, size_t input_index, const Tensor& g, const TensorMeta& expected) {
  TANDEM_CHECK(g.shape() == expected.shape,
               "backward of {} returned a gradient of shape {} for input {}, which has shape {}",
               producer.name(), shape_str(g.shape()), input_index, shape_str(expected.shape));
  TANDEM_CHECK(g.device() == expected.device, "backward of {} returned a gradient on {} for input {} on {}",
               producer.name(), g.device().str(), input_index, expected.device.str());
}

// The engine proper. With `captures`, gradients arriving at those (node, slot) pairs are stored
// there and leaf accumulators are not run (grad() mode).
void execute(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
             std::unordered_map<CaptureKey, Tensor, CaptureHash>* captures) {
  TANDEM_CHECK(roots.size() == grads.size(), "backward: {} roots but {} gradients", roots.size(), grads.size());
  NoGradGuard no_grad;

  GradientBuffers buffers;
  std::vector<std::shared_ptr<Node>> root_nodes;
  std::vector<Tensor> implicit_roots;
  ImplicitRootsScope implicit_scope(&implicit_roots);
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TANDEM_CHECK(r.requires_grad(), "backward: tensor {} does not require grad and has no grad_fn",
                 i);
    Tensor g = grads[i];
    if (!g.defined()) {
      TANDEM_CHECK(r.numel() == 1, "backward: a gradient can be created implicitly only for scalar outputs; "
                   "the output has shape {}; pass a gradient", shape_str(r.shape()));
      g = Tensor::ones(r.shape(), r.dtype(), r.device());
      implicit_roots.push_back(g);
    }
    TANDEM_CHECK(g.shape() == r.shape(), "backward: gradient of shape {} given for an output of shape {}",
                 shape_str(g.shape()), shape_str(r.shape()));
    Edge e = gradient_edge(r);
    auto& buf = buffers[e.fn.get()];
    buf.resize(e.fn->output_meta().size());
    accumulate_into(buf[static_cast<size_t>(e.input_nr)], g, e.fn->output_meta()[static_cast<size_t>(e.input_nr)].dtype);
    root_nodes.push_back(e.fn);
  }

  // Count the edges into each node reachable from the roots.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& n : root_nodes)
    if (seen.insert(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.fn) continue;
      dependencies[e.fn.get()] += 1;
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }

  auto later_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence_nr() < b->sequence_nr();
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later_first)> ready(
      later_first);
  std::unordered_set<Node*> queued;
  for (auto& n : root_nodes)
    if (dependencies[n.get()] == 0 && queued.insert(n.get()).second) ready.push(n);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    inputs.resize(node->output_meta().size());

    const bool is_leaf_sink = node->next_edges().empty() && dynamic_cast<AccumulateGrad*>(node.get());
    // Both take an undefined gradient as "all of it was added through the sink": no zeros made.
    const bool takes_undefined = is_leaf_sink || dynamic_cast<LeafCast*>(node.get());
    if (captures) {
      for (size_t s = 0; s < inputs.size(); ++s) {
        auto it = captures->find({node.get(), static_cast<int>(s)});
        if (it == captures->end()) continue;
        const DType want = node->output_meta()[s].dtype;  // a leaf's narrower gradient comes back widened
        it->second = inputs[s].defined() && inputs[s].dtype() != want ? in_dtype(inputs[s], want) : inputs[s];
      }
      if (is_leaf_sink) continue;
    }
    for (size_t s = 0; s < inputs.size() && !takes_undefined; ++s) {
      if (!inputs[s].defined()) {
        const TensorMeta& m = node->output_meta()[s];
        inputs[s] = Tensor::zeros(m.shape, m.dtype, m.device);
      }
    }
    std::vector<Tensor> out;
    {
      // grad() leaves every .grad alone and hands out no interior sinks either
      SinkNodeScope scope(captures ? nullptr : node.get(), captures ? nullptr : &buffers);
      out = node->apply(inputs);
    }
    if (!retain_graph) {
      node->release();
      node->mark_released();
    }
    const auto& edges = node->next_edges();
    TANDEM_CHECK(out.size() == edges.size() || is_leaf_sink,
                 "backward of {} returned {} gradients for {} inputs", node->name(), out.size(), edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.fn) continue;
      if (out[i].defined()) {
        check_gradient(*node, i, out[i], node->input_meta()[i]);
        auto& buf = buffers[e.fn.get()];
        buf.resize(e.fn->output_meta().size());
        accumulate_into(buf[static_cast<size_t>(e.input_nr)], out[i],
                        e.fn->output_meta()[static_cast<size_t>(e.input_nr)].dtype);
      }
      if (--dependencies[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn);
    }
  }
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  execute(roots, grads, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  std::unordered_map<CaptureKey, Tensor, CaptureHash> captures;
  std::vector<CaptureKey> keys;
  for (const Tensor& t : inputs) {
    TANDEM_CHECK(t.requires_grad(), "grad: an input does not require grad");
    Edge e = gradient_edge(t);
    keys.push_back({e.fn.get(), e.input_nr});
    captures[keys.back()] = Tensor();
  }
  std::vector<Tensor> gouts = grad_outputs;
  gouts.resize(outputs.size());
  // Keep the leaf accumulators alive for the duration: gradient_edge may have just made them.
  std::vector<Edge> keep;
  for (const Tensor& t : inputs) keep.push_back(gradient_edge(t));
  execute(outputs, gouts, retain_graph, &captures);
  std::vector<Tensor> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor g = captures[keys[i]];
    result.push_back(g.defined() ? g : Tensor::zeros(inputs[i].shape(), inputs[i].dtype(), inputs[i].device()));
  }
  return result;
}

}  // namespace tandem
