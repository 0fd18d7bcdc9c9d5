// Sequential container.
#include "nn/layers/sequential.h"

#include "nn/layers/activation.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/identity.h"
#include "nn/layers/pool.h"

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

namespace {
// Child i as an M, or null (also past the end).
template <class M>
M* child_as(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children, size_t i) {
  return i < children.size() ? dynamic_cast<M*>(children[i].second.get()) : nullptr;
}
}  // namespace

int Sequential::fuse_batchnorm_epilogues() {
  auto to_identity = [&](size_t i) {
    auto identity = std::make_shared<Identity>();
    identity->train(children_[i].second->is_training());
    replace_module(children_[i].first, identity);
  };
  int fused = 0;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (auto* nested = child_as<Sequential>(children_, i)) fused += nested->fuse_batchnorm_epilogues();
    auto* bn = child_as<BatchNormBase>(children_, i);
    if (bn == nullptr || bn->epilogue().relu || bn->epilogue().max_pool || !child_as<ReLU>(children_, i + 1))
      continue;
    ops::BatchNormEpilogue e;
    e.relu = true;
    to_identity(i + 1);
    if (auto* pool = child_as<MaxPool2d>(children_, i + 2)) {
      e.max_pool = true;
      e.pool_kernel = {pool->kernel_size(), pool->kernel_size()};
      e.pool_stride = {pool->stride(), pool->stride()};
      e.pool_padding = {pool->padding(), pool->padding()};
      to_identity(i + 2);
    }
    bn->set_epilogue(e);
    ++fused;
  }
  return fused;
}

Module& Sequential::operator[](size_t i) const { return *at(i); }

}  // namespace tandem::nn
