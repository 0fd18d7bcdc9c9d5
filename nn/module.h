// Module: named parameters, buffers and children; train/eval; state_dict; deep clone (for
// DataParallel replicas). Subclasses reach their tensors through the registry (param("weight")),
// so a clone is complete by construction.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  virtual std::string type_name() const = 0;

  // Recursive, in registration order; names like "features.0.weight".
  NamedTensors named_parameters() const;  // a tensor registered in several modules: once, first name
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  NamedTensors state_dict() const;  // parameters then buffers, same tensors (not copies)
  // Copies values in; checks names, shapes and dtypes with errors naming the entry.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Zeros every parameter's gradient in place (keeps gradient storage, e.g. DDP bucket views).
  void zero_grad();
  // Moves every parameter and buffer to `device` in place: existing Tensor handles see the move.
  void to(Device device);
  void to(DType dtype);  // floating parameters and buffers only

  // A deep copy: new parameter and buffer tensors with the same values, no gradients.
  virtual std::shared_ptr<Module> clone() const = 0;

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  bool has_param(const std::string& name) const;
  // Visits this module and every descendant, depth first, with its dotted path ("" for the root).
  void apply(const std::function<void(const std::string& path, Module& m)>& fn, const std::string& prefix = "");

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);  // marks requires_grad
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  void replace_module(const std::string& name, std::shared_ptr<Module> m);
  // After a shallow copy-construction: deep-copies tensors and clones children (used by clone()).
  void deep_copy_state();

  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;

 private:
  // `own` (params_ or buffers_) of this module, then of every child with its dotted prefix.
  NamedTensors named_tensors(NamedTensors Module::*own) const;
};

// CRTP helper: clone() through Derived's copy constructor, then a deep copy of the registry.
template <class Derived>
class Cloneable : public Module {
 public:
  std::shared_ptr<Module> clone() const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->deep_copy_state();
    return copy;
  }
};

}  // namespace tandem::nn
