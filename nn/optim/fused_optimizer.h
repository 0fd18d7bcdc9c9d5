// Fused multi-tensor optimizers: one kernel launch per device updates every parameter (Apex's
// multi_tensor_apply), with the GradScaler's unscale and global-norm clipping folded into the
// update as one gradient factor, and optional f32 master weights for f16/bf16 models.
//
// Master weights: with FusedOptions::master_weights and f16/bf16 model parameters, the optimizer's
// own parameters (param_groups) are f32 copies; the model's gradients are read, the f32 copies are
// updated, and the model's tensors receive the rounded values. Their state (moments in f32, the
// "master" copies) goes through state_tensors()/load_state_tensors() like any optimizer state.
//
// Optimizer::step() and zero_grad() are virtual, so calls through an Optimizer& take the fused
// path too (step: one launch per device; zero_grad: the model's gradients, which in master-weights
// mode are not on the group params). nn::optimizer_step(opt) is the same call, kept for callers.
#pragma once
#include <vector>

#include "nn/optim/optimizer.h"

namespace tandem::nn {

struct FusedOptions {
  double max_grad_norm = 0.0;   // > 0: clip the global gradient norm (as clip_grad_norm) in the step
  bool master_weights = false;  // keep f32 copies of f16/bf16 parameters
};

struct GradCheck {
  double sum_squares = 0.0;  // over every gradient, as stored (scaled if the loss was scaled)
  bool found_inf = false;
};

class FusedOptimizer : public Optimizer {
 public:
  // Unscaled, unclipped gradients: a plain fused step (clipping when max_grad_norm > 0).
  void step();
  // One read pass over the gradients of every device: sum of squares and the inf/nan check.
  GradCheck check_grads() const;
  // The update with gradients multiplied by inv_scale and, when clipping, by the clip coefficient
  // computed from `scaled_sum_squares` (check_grads().sum_squares of the same gradients; pass a
  // negative value to have it computed). Gradients are left untouched.
  void fused_step(double inv_scale, double scaled_sum_squares = -1.0);
  // Zeros the model parameters' gradients (in master-weights mode the group params hold none).
  void zero_grad();

  const FusedOptions& fused_options() const { return fused_; }
  double last_grad_norm() const { return last_grad_norm_; }  // unscaled, before clipping (when clipping)
  // The tensors whose gradients are read: the model's parameters, in group order.
  const std::vector<Tensor>& model_params() const { return model_params_; }
  bool has_master_weights() const { return has_master_; }

 protected:
  FusedOptimizer(std::vector<ParamGroup> groups, const FusedOptions& options);
  // Launch the update of `indices` (global parameter indices, all with a gradient, on `device`).
  virtual void launch(Device device, const std::vector<size_t>& indices, double grad_factor) = 0;
  // The per-tensor path of Optimizer::step: the same kernel on a list of one.
  void update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) override;

  // Group of a global index.
  const ParamGroup& group_of(size_t index) const;
  const Tensor& opt_param(size_t index) const { return opt_params_[index]; }
  Tensor model_param(size_t index) const { return model_params_[index]; }
  // Master mode: per-parameter state "master" (the f32 copy).
  NamedTensors master_state(size_t index) const;
  bool set_master_state(size_t index, const std::string& name, const Tensor& value);

 private:
  FusedOptions fused_;
  std::vector<Tensor> model_params_;  // what the model owns (gradients live here)
  std::vector<Tensor> opt_params_;    // what is updated: model params, or their f32 masters
  bool has_master_ = false;
  double last_grad_norm_ = 0.0;
};

// step() on the fused type when `opt` is fused, Optimizer::step() otherwise.
void optimizer_step(Optimizer& opt);

}  // namespace tandem::nn
