// Define-by-run autograd: every differentiable op records a Node holding a backward closure that
// captures only what backward reads; Tensor::backward walks the graph in reverse creation order and
// accumulates into the leaves' .grad, then fires their grad-ready hooks (DDP launches bucket
// reductions from them). This is the user's API (custom ops through record()); what the library's own
// ops, autocast and DDP reach into the engine with is in runtime/autograd_engine.h, not installed.
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

// Gradients of `outputs` w.r.t. `inputs` without touching any .grad (used by tests and checkpoint).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

}  // namespace tandem
