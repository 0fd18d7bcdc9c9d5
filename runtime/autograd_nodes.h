// The autograd engine's own nodes, which recording (autograd.cpp) makes and the backward pass
// (autograd_execute.cpp) recognises: a leaf's gradient sink (AccumulateGrad) and a leaf's autocast
// cast (LeafCast). Internal to the engine.
#pragma once
#include <limits>
#include <memory>
#include <vector>

#include "runtime/autograd.h"
#include "runtime/backend/core.h"
#include "runtime/tensor_impl.h"

namespace tandem::autograd_detail {

inline TensorMeta meta_of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }

// A new tensor holding g's values in `dtype` (a copy even when g already has it).
inline Tensor in_dtype(const Tensor& g, DType dtype) {
  if (g.dtype() == dtype) return g.clone();
  Tensor out = Tensor::empty(g.shape(), dtype, g.device());
  kernels::cast(g.device())(g, out);
  return out;
}

// A leaf's gradient sink: accumulates into .grad, then runs the leaf's grad-ready hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf)
      : Node("AccumulateGrad", {}, {meta_of(leaf)}, {meta_of(leaf)}), leaf_(leaf.impl_ptr()) {
    // Runs as soon as it is ready: gradients become visible (and DDP buckets fire) early.
    seq_ = std::numeric_limits<uint64_t>::max();
  }

  // grads[0] is undefined when every gradient was added through sink() (or none arrived).
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    auto impl = leaf_.lock();
    if (!impl) return {};  // the leaf is gone; nothing to accumulate into
    Tensor leaf(impl);
    const Tensor& g = grads[0];  // may be narrower than the leaf (an autocast cast's gradient)
    Tensor existing = leaf.grad();
    if (existing.defined()) {
      // In place, so that gradients living in DDP buckets stay there; widened as it is added.
      if (g.defined()) kernels::axpy(existing.device())(existing, g, 1.0);
    } else if (g.defined()) {
      leaf.set_grad(in_dtype(g, leaf.dtype()));  // own the memory: g may be shared with other leaves' gradients
    } else {
      set_zero_grad(leaf);
    }
    for (auto& hook : impl->grad_ready_hooks) hook(leaf);
    return {};
  }

  // The leaf's .grad for a backward to add into itself (made as zeros when the leaf has none, so
  // that the first step takes the same path as the others: a resumed run stays bitwise), or
  // undefined when it does not have the leaf's dtype, shape and device.
  Tensor sink() const {
    auto impl = leaf_.lock();
    if (!impl) return {};
    Tensor leaf(impl);
    Tensor existing = leaf.grad();
    if (!existing.defined()) return set_zero_grad(leaf);
    const bool usable = existing.dtype() == leaf.dtype() && existing.shape() == leaf.shape() &&
                        existing.device() == leaf.device();
    return usable ? existing : Tensor();
  }

 private:
  static Tensor set_zero_grad(Tensor& leaf) {
    leaf.set_grad(Tensor::zeros(leaf.shape(), leaf.dtype(), leaf.device()));
    return leaf.grad();
  }

  std::weak_ptr<TensorImpl> leaf_;
};

// out = a leaf's values in a narrower dtype (an autocast cast of a parameter): its gradient goes to
// the leaf's accumulator as it is (undefined too: every part of it was added through the sink), and
// is widened there as it is added to .grad.
class LeafCast final : public Node {
 public:
  using Node::Node;
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override { return {grads[0]}; }
};

}  // namespace tandem::autograd_detail
