// Sequential: children named "0", "1", ... run in order.
#pragma once
#include <initializer_list>

#include "nn/module.h"

namespace tandem::nn {

class Sequential : public Cloneable<Sequential> {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // Appends a module named by its position; returns it.
  std::shared_ptr<Module> push_back(std::shared_ptr<Module> m);
  template <class M, class... Args>
  std::shared_ptr<M> emplace_back(Args&&... args) {
    auto m = std::make_shared<M>(std::forward<Args>(args)...);
    push_back(m);
    return m;
  }
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return children_.size(); }
  Module& operator[](size_t i) const;
  std::shared_ptr<Module> at(size_t i) const;

  // Fuses every BatchNorm directly followed by a ReLU, and the MaxPool2d after that if there is one
  // (here and in nested Sequentials): the BatchNorm applies them as its epilogue and their places hold
  // an Identity each, as PyTorch's fuse_modules leaves them. Names, parameters, buffers and results
  // are unchanged; training on CPU skips two passes over the activations each way per module fused.
  // Returns the number of BatchNorms that took an epilogue.
  int fuse_batchnorm_epilogues();
};

}  // namespace tandem::nn
