// Define-by-run autograd: every differentiable op records a Node holding a backward closure that
// captures only what backward reads; Tensor::backward walks the graph in reverse creation order and
// accumulates into the leaves' .grad, then fires their grad-ready hooks (DDP launches bucket
// reductions from them).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tandem {

// Gradients w.r.t. the node's inputs (undefined where an input needs none), given the gradients
// w.r.t. its outputs (zeros are filled in for outputs that received none).
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

struct Edge {
  std::shared_ptr<Node> fn;  // null: the input does not require grad
  int input_nr = 0;          // which output slot of fn the gradient flows into
};

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
};

class Node {
 public:
  Node(std::string name, std::vector<Edge> next_edges, std::vector<TensorMeta> inputs,
       std::vector<TensorMeta> outputs);
  virtual ~Node() = default;

  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  virtual void release() {}  // drops saved state after a backward without retain_graph

  const std::string& name() const { return name_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<TensorMeta>& input_meta() const { return inputs_; }
  const std::vector<TensorMeta>& output_meta() const { return outputs_; }
  uint64_t sequence_nr() const { return seq_; }
  bool released() const { return released_; }
  void mark_released() { released_ = true; }

 protected:
  uint64_t seq_;

 private:
  std::string name_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> inputs_, outputs_;
  bool released_ = false;
};

// The node of an op: a backward closure.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::vector<Edge> next, std::vector<TensorMeta> inputs,
               std::vector<TensorMeta> outputs, BackwardFn fn);
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;
};

// Thread-local switch: while disabled, ops record nothing.
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// True when an op on these inputs must record a node.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records an op: when grad mode is on and some input requires grad, makes a FunctionNode with
// edges to the inputs and makes `outputs` its outputs (requires_grad, grad_fn). Returns outputs.
std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs,
                           std::vector<Tensor> outputs, BackwardFn backward);
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn backward);

// Records out = leaf's values in a narrower dtype (autocast's cast of a parameter): gradients of out
// reach the leaf as they are and are widened as they are added to its .grad. Returns out.
Tensor record_leaf_cast(const Tensor& leaf, Tensor out);

// Which inputs gradient_sink answers for: leaves only, or also an input made by another op
// (AnyInput), for a closure whose add into it gives the bits the engine's own add would.
enum class SinkOf { Leaf, AnyInput };

// Inside a backward closure run by run_backward (never by grad()): the tensor that the gradient for
// input `input_index` would be added to unchanged: the .grad of the leaf behind that input,
// directly or through record_leaf_cast (made as zeros if the leaf has none yet), or with AnyInput,
// for an input made by another op, the gradient its other consumers have summed so far (a residual
// stream's, x + f(LayerNorm(x)), when LayerNorm runs), offered only when the engine alone holds
// it; undefined when there is none. A closure that adds its gradient there itself (a GEMM with
// beta 1) returns an undefined gradient for that input: nothing is lost, and the leaf's grad-ready
// hooks still fire after every gradient for it is in. A leaf's sink has the leaf's dtype, which may
// be wider than the input's (f32 for a bf16 cast); an interior one the input's. TANDEM_GRAD_SINK=off
// offers none, =leaves only leaves' (A/B runs).
Tensor gradient_sink(size_t input_index, SinkOf which = SinkOf::Leaf);

// Inside a backward closure: whether g is a root gradient the running backward made itself (ones,
// for a scalar root given no gradient: loss.backward()). An op may then return the gradient it
// made in its forward for an output gradient of 1 instead of a pass of its own (cross_entropy).
bool is_implicit_root_gradient(const Tensor& g);

// The edge a gradient for `t` flows into: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);

// Runs backward from roots with the given output gradients (undefined: ones for a scalar root).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

// Gradients of `outputs` w.r.t. `inputs` without touching any .grad (used by tests and checkpoint).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

}  // namespace tandem
