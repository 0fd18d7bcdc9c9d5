// The autograd engine's internal entry points: what the library's own ops, autocast, checkpointing
// and DDP reach into it with (gradient sinks and implicit roots, the two backward fast paths; a leaf
// cast; gradient edges; running a backward pass). Not installed: the user's API is runtime/autograd.h,
// and these may change with the engine.
#pragma once
#include <vector>

#include "runtime/autograd.h"

namespace tandem {

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

}  // namespace tandem
