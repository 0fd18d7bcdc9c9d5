// Sequential container.
#include "nn/layers/sequential.h"

namespace tandem::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

std::shared_ptr<Module> Sequential::push_back(std::shared_ptr<Module> m) {
  TANDEM_CHECK(m != nullptr, "Sequential: module {} is null", children_.size());
  return register_module(std::to_string(children_.size()), std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  TANDEM_CHECK(!children_.empty(), "Sequential: forward on an empty Sequential");
  Tensor h = x;
  for (auto& [name, m] : children_) h = m->forward(h);
  return h;
}

std::shared_ptr<Module> Sequential::at(size_t i) const {
  TANDEM_CHECK(i < children_.size(), "Sequential: index {} out of range (size {})", i, children_.size());
  return children_[i].second;
}

Module& Sequential::operator[](size_t i) const { return *at(i); }

}  // namespace tandem::nn
