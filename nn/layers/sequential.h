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
};

}  // namespace tandem::nn
