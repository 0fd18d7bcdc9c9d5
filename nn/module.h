// Module: named parameters, buffers and children; train/eval; state_dict; deep clone (for
// DataParallel replicas). Subclasses reach their tensors through the registry (param("weight")),
// so a clone is complete by construction; one that keeps children or parameters in members builds
// them in Cloneable::reset() instead (see Cloneable below and docs/cpp-api.md).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  // One tensor in, one out: what almost every module is. A module overrides forward, forward_many,
  // or both; each default calls the other (a module that overrides neither fails with its name
  // instead of recursing).
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // Several inputs and outputs (a model fed two tensors, or returning logits and an auxiliary
  // output). The default takes exactly one input and returns {forward(inputs[0])}; a module with
  // several inputs overrides this one. DistributedDataParallel and DataParallel forward it as it is.
  virtual std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs);
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
  // The reset() path of Cloneable::clone: empties the registry a copy-construction copied, then
  // (after reset() rebuilt it) copies `original`'s values, dtypes, devices, requires_grad and
  // training flags in by name, checking that reset() built the same modules and tensors.
  void clear_registry();
  void copy_state_from(const Module& original);

  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;

 private:
  // `own` (params_ or buffers_) of this module, then of every child with its dotted prefix.
  NamedTensors named_tensors(NamedTensors Module::*own) const;
};

namespace detail {
// Puts default_generator() back as it was when this goes out of scope.
class KeepDefaultGenerator {
 public:
  KeepDefaultGenerator() : saved_(default_generator()) {}
  ~KeepDefaultGenerator() { default_generator() = saved_; }
  KeepDefaultGenerator(const KeepDefaultGenerator&) = delete;
  KeepDefaultGenerator& operator=(const KeepDefaultGenerator&) = delete;

 private:
  Generator saved_;
};

// Catches a clone whose members still point at the original. Taken before the copy-construction,
// it notes the use count of every child module and every parameter and buffer of `original`'s
// tree; check() runs once the copy is complete, when the copy's registry has let go of them again.
// A count still higher then is held by the copy: a member shared_ptr or Tensor of the copy aliases
// the original's child or tensor (the implicit copy constructor copied the pointer, and nothing
// can re-point it). Raw pointers and references are not counted and go unseen.
class CloneAliasCheck {
 public:
  explicit CloneAliasCheck(const Module& original);
  // Throws a ValueError naming the class, the aliased names and the fix.
  void check(const std::string& type, bool has_reset) const;

 private:
  struct Watched {
    std::string name;
    std::weak_ptr<const void> ptr;
    long count;
  };
  std::vector<Watched> children_, tensors_;
};
}  // namespace detail

// CRTP helper: clone() for Derived.
//
// A Derived that reaches its children and tensors only through the registry (param("weight"),
// children()[i]) needs nothing: clone() copy-constructs it and deep-copies the registry.
//
// A Derived that keeps them in members (std::shared_ptr<Linear> fc; Tensor w;) builds them in
// `void reset() override` and calls reset() from its constructor, as in PyTorch's C++ API:
//
//   struct Net : nn::Cloneable<Net> {
//     std::shared_ptr<nn::Linear> fc;
//     Net() { reset(); }
//     void reset() override { fc = register_module("fc", std::make_shared<nn::Linear>(4, 8)); }
//     ...
//   };
//
// clone() then copy-constructs, empties the copy's registry, calls the copy's reset() (which
// re-registers and re-points the members at new modules and tensors), and copies the original's
// state_dict values in by name (with their dtypes and devices) and the training flags. reset()'s
// random draws are undone: clone() leaves default_generator() as it found it.
//
// The copy constructor cannot re-point members, so without reset() a member-holding Derived would
// clone into a copy that runs the original's submodules; clone() detects that (CloneAliasCheck)
// and throws instead.
template <class Derived>
class Cloneable : public Module {
 public:
  // Builds this module's children, parameters and buffers (see above). Overriding it switches
  // clone() to the rebuild path; the constructor must call it.
  virtual void reset() {}

  std::shared_ptr<Module> clone() const override {
    // Whether Derived overrides reset(), known at compile time: &Derived::reset names Cloneable's
    // own reset (of type void (Cloneable::*)()) unless Derived declares one.
    constexpr bool has_reset = !std::is_same_v<decltype(&Derived::reset), void (Cloneable::*)()>;
    const detail::CloneAliasCheck aliases(*this);
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    if constexpr (has_reset) {
      copy->clear_registry();
      {
        detail::KeepDefaultGenerator keep;  // reset() redraws; the copy takes our values instead
        copy->reset();
      }
      copy->copy_state_from(*this);
    } else {
      copy->deep_copy_state();
    }
    aliases.check(type_name(), has_reset);
    return copy;
  }
};

}  // namespace tandem::nn
