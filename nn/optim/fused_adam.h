// FusedAdam / FusedAdamW: torch.optim.Adam/AdamW math (kernels/common/adam_step.h) over all
// parameters of a device per launch. State names equal Adam's ("step", "exp_avg", "exp_avg_sq"),
// plus "master" in master-weights mode, so checkpoints move between fused and unfused optimizers.
#pragma once
#include "nn/optim/adam.h"
#include "nn/optim/fused_optimizer.h"

namespace tandem::nn {

class FusedAdam : public FusedOptimizer {
 public:
  FusedAdam(std::vector<ParamGroup> groups, const AdamOptions& options, const FusedOptions& fused = {},
            bool decoupled = false);
  FusedAdam(const std::vector<Tensor>& params, const AdamOptions& options, const FusedOptions& fused = {});
  std::string type_name() const override { return decoupled_ ? "FusedAdamW" : "FusedAdam"; }
  std::unique_ptr<Optimizer> with_groups(std::vector<ParamGroup> groups) const override {
    return std::make_unique<FusedAdam>(std::move(groups), options_, fused_options(), decoupled_);
  }
  const AdamOptions& options() const { return options_; }

 protected:
  void launch(Device device, const std::vector<size_t>& indices, double grad_factor) override;
  NamedTensors param_state(size_t index) const override;
  void reset_param_state(size_t index) override;
  void set_param_state(size_t index, const std::string& name, const Tensor& value) override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq", "master"}; }

 private:
  struct State {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq;  // dtype of the updated tensor (f32 for master weights)
  };
  AdamOptions options_;
  bool decoupled_;
  std::vector<State> state_;
};

class FusedAdamW : public FusedAdam {
 public:
  FusedAdamW(std::vector<ParamGroup> groups, const AdamOptions& options, const FusedOptions& fused = {})
      : FusedAdam(std::move(groups), options, fused, true) {}
  FusedAdamW(const std::vector<Tensor>& params, const AdamOptions& options, const FusedOptions& fused = {})
      : FusedAdam(single_group(params, options.lr, options.weight_decay), options, fused, true) {}
};

}  // namespace tandem::nn
