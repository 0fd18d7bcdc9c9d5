// FusedSGD: torch.optim.SGD math (momentum, dampening, nesterov, weight decay) over all parameters
// of a device per launch. State names equal SGD's ("momentum_buffer"), plus "master".
#pragma once
#include "nn/optim/fused_optimizer.h"
#include "nn/optim/sgd.h"

namespace tandem::nn {

class FusedSGD : public FusedOptimizer {
 public:
  FusedSGD(std::vector<ParamGroup> groups, const SGDOptions& options, const FusedOptions& fused = {});
  FusedSGD(const std::vector<Tensor>& params, const SGDOptions& options, const FusedOptions& fused = {});
  std::string type_name() const override { return "FusedSGD"; }
  std::unique_ptr<Optimizer> with_groups(std::vector<ParamGroup> groups) const override {
    return std::make_unique<FusedSGD>(std::move(groups), options_, fused_options());
  }
  const SGDOptions& options() const { return options_; }

 protected:
  void launch(Device device, const std::vector<size_t>& indices, double grad_factor) override;
  NamedTensors param_state(size_t index) const override;
  void reset_param_state(size_t index) override;
  void set_param_state(size_t index, const std::string& name, const Tensor& value) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer", "master"}; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

}  // namespace tandem::nn
