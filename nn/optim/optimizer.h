// Optimizer base: parameter groups (each with its lr and weight decay), step(), zero_grad(), and
// all state as named tensors (step counts as i64 scalars) so checkpoints can save and restore it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "runtime/tensor.h"

namespace tandem::nn {

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 0.0;
  double weight_decay = 0.0;
  // Set by the first LR scheduler attached to the optimizer (PyTorch's group["initial_lr"]);
  // negative while unset.
  double initial_lr = -1.0;
};

// Sets the defined gradients of `params` to zero in place (one multi-tensor launch per device, not
// one fill per tensor); undefined ones stay undefined.
void zero_grads(const std::vector<Tensor>& params);

namespace parallel {
class ZeroOptimizer;
}

class Optimizer {
  friend class parallel::ZeroOptimizer;  // reads and restores its shard optimizer's state

 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (parameters without one are skipped, as PyTorch),
  // under NoGradGuard, on the parameter's device. Counts steps.
  virtual void step();  // virtual: the fused optimizers replace the per-tensor loop
  // Zeros gradients in place (keeps their storage: DDP bucket views stay valid).
  virtual void zero_grad();

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void add_param_group(ParamGroup group);
  // Sets / reads the lr of every group (get_lr: group 0's) or of one group.
  void set_lr(double lr);
  void set_lr(size_t group, double lr);
  double get_lr(size_t group = 0) const;
  int64_t step_count() const { return step_count_; }

  // All state, named "step", "param_groups.<g>.lr", "state.<i>.<name>" with i the parameter's
  // index over all groups in order (as PyTorch's state_dict). Tensors are copies.
  // Virtual: ZeRO's optimizer gives (and takes) the whole model's state in this same layout.
  virtual NamedTensors state_tensors() const;
  // Restores what state_tensors() returned; checks names, shapes and dtypes, naming the entry.
  // Per-parameter state missing from `state` is reset (e.g. a momentum buffer not yet created).
  virtual void load_state_tensors(const NamedTensors& state);

  virtual std::string type_name() const = 0;
  // A new optimizer of the same type and hyperparameters over `groups`, without state (ZeRO builds
  // its shard's optimizer from the run's one: nn/parallel/zero_optimizer.h). NotSupportedError for
  // a type that does not say how.
  virtual std::unique_ptr<Optimizer> with_groups(std::vector<ParamGroup> groups) const;

 protected:
  explicit Optimizer(std::vector<ParamGroup> groups);
  // One parameter's update; `index` is its global index, `grad` is defined.
  virtual void update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) = 0;
  // Per-parameter state tensors by name (defined ones only) and their restore hook.
  virtual NamedTensors param_state(size_t index) const = 0;
  virtual void reset_param_state(size_t index) = 0;
  virtual void set_param_state(size_t index, const std::string& name, const Tensor& value) = 0;
  // Called before loading with the state names given for one parameter: throws when they do not
  // fit together (e.g. Adam's exp_avg without exp_avg_sq).
  virtual void check_loaded_state(size_t /*index*/, const std::vector<std::string>& /*given*/) const {}
  // Names a per-parameter state entry may have (for load errors).
  virtual std::vector<std::string> state_names() const = 0;

  size_t num_params() const;
  const Tensor& param_at(size_t index) const;

  std::vector<ParamGroup> groups_;
  int64_t step_count_ = 0;
};

// A group of all of `params` with one lr and weight decay.
std::vector<ParamGroup> single_group(const std::vector<Tensor>& params, double lr, double weight_decay = 0.0);

}  // namespace tandem::nn
