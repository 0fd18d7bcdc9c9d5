// torch.optim.SGD: momentum, dampening, nesterov, weight decay (L2 added to the gradient).
#pragma once
#include "nn/optim/optimizer.h"

namespace tandem::nn {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  // Groups keep their own lr and weight_decay; momentum, dampening and nesterov are shared.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  SGD(const std::vector<Tensor>& params, const SGDOptions& options);
  std::string type_name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> with_groups(std::vector<ParamGroup> groups) const override {
    return std::make_unique<SGD>(std::move(groups), options_);
  }
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) override;
  NamedTensors param_state(size_t index) const override;
  void reset_param_state(size_t index) override;
  void set_param_state(size_t index, const std::string& name, const Tensor& value) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until its first step with momentum
};

}  // namespace tandem::nn
