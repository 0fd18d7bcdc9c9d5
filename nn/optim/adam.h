// torch.optim.Adam (weight decay as L2 on the gradient) and torch.optim.AdamW (decoupled decay
// p *= 1 - lr*wd), with bias correction and eps outside the sqrt. amsgrad is not supported.
#pragma once
#include "nn/optim/optimizer.h"

namespace tandem::nn {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // AdamW's default is 1e-2 (see AdamW below)
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options);
  Adam(const std::vector<Tensor>& params, const AdamOptions& options);
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::unique_ptr<Optimizer> with_groups(std::vector<ParamGroup> groups) const override {
    return std::unique_ptr<Optimizer>(new Adam(std::move(groups), options_, decoupled_));
  }
  const AdamOptions& options() const { return options_; }
  // Optimizer::step(), with the parameters of a GPU (or the emulator) updated by multi-tensor
  // launches, a launch or two per device, not one per parameter: the same per-element update, so
  // the same bits as the per-parameter loop, which the CPU keeps.
  void step() override;

 protected:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled);
  void update(const ParamGroup& group, size_t index, Tensor& param, const Tensor& grad) override;
  NamedTensors param_state(size_t index) const override;
  void reset_param_state(size_t index) override;
  void set_param_state(size_t index, const std::string& name, const Tensor& value) override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  void check_loaded_state(size_t index, const std::vector<std::string>& given) const override;

 private:
  struct State {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq;  // undefined until the parameter's first step
  };
  // The parameter's state, made on its first step, its step counted.
  State& next_step(size_t index, const Tensor& param);
  AdamOptions options_;
  bool decoupled_;
  std::vector<State> state_;
};

class AdamW : public Adam {
 public:
  // Defaults as torch.optim.AdamW: weight_decay 1e-2.
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
  AdamW(std::vector<ParamGroup> groups, const AdamOptions& options) : Adam(std::move(groups), options, true) {}
  AdamW(const std::vector<Tensor>& params, const AdamOptions& options)
      : Adam(single_group(params, options.lr, options.weight_decay), options, true) {}
};

}  // namespace tandem::nn
