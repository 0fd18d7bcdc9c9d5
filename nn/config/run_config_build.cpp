// The objects a run config describes: the model, the optimizer, the LR schedule, and the loss.
#include <algorithm>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/layer_specs.h"
#include "nn/layers.h"
#include "nn/model_registry.h"
#include "nn/optim.h"
#include "nn/optim/fused_adam.h"
#include "nn/optim/fused_sgd.h"
#include "runtime/error.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::config {

namespace {

// The builders' checks fail with the key path; a parsed config has passed them already, with lines.
const ConfigFail kThrow = [](const std::string& path, const std::string& what) {
  TANDEM_FAIL(Value, "{}: {}", path, what);
};

// One group with the options' decay, or the matrices with it and the rest without (each group's lr
// and weight_decay override the optimizer options').
std::vector<ParamGroup> param_groups(const OptimizerConfig& o, const std::vector<Tensor>& params, DecayOn decay_on) {
  if (decay_on == DecayOn::All) return single_group(params, o.learning_rate, o.weight_decay);
  ParamGroup decay, rest;
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : rest).params.push_back(p);
  decay.lr = rest.lr = o.learning_rate;
  decay.weight_decay = o.weight_decay;
  std::vector<ParamGroup> groups;
  for (ParamGroup* g : {&decay, &rest})
    if (!g->params.empty()) groups.push_back(std::move(*g));
  return groups;
}

}  // namespace

std::shared_ptr<Module> build_model(const ModelConfig& model, Generator& gen) {
  check_model(model, kThrow);
  return model_entry(model.type).build(model, gen);
}

AdamOptions adam_options(const OptimizerConfig& o) {
  AdamOptions ao;
  ao.lr = o.learning_rate;
  ao.beta1 = o.beta1;
  ao.beta2 = o.beta2;
  ao.eps = o.eps;
  ao.weight_decay = o.weight_decay;
  return ao;
}

std::unique_ptr<Optimizer> build_optimizer(const OptimizerConfig& o, const std::vector<Tensor>& params,
                                           DecayOn decay_on) {
  check_optimizer(o, kThrow);
  std::vector<ParamGroup> groups = param_groups(o, params, decay_on);
  if (o.type == OptimizerType::SGD) {
    SGDOptions so;
    so.lr = o.learning_rate;
    so.momentum = o.momentum;
    so.dampening = o.dampening;
    so.weight_decay = o.weight_decay;
    so.nesterov = o.nesterov;
    if (o.fused) return std::make_unique<FusedSGD>(std::move(groups), so);
    return std::make_unique<SGD>(std::move(groups), so);
  }
  const AdamOptions ao = adam_options(o);
  if (o.type == OptimizerType::AdamW) {
    if (o.fused) return std::make_unique<FusedAdamW>(std::move(groups), ao);
    return std::make_unique<AdamW>(std::move(groups), ao);
  }
  if (o.fused) return std::make_unique<FusedAdam>(std::move(groups), ao);
  return std::make_unique<Adam>(std::move(groups), ao);
}

std::unique_ptr<LRScheduler> build_scheduler(const ScheduleConfig& s, Optimizer& optimizer, int64_t total_steps) {
  check_schedule(s, kThrow);
  if (s.type == ScheduleType::LinearWarmup) {
    // The inner schedule counts from the end of the warmup (SequentialLR's milestone); built first, it
    // and the warmup share the groups' initial lr as their base.
    std::shared_ptr<LRScheduler> cosine;
    if (s.t_max > 0) cosine = std::make_shared<CosineAnnealingLR>(optimizer, s.t_max, s.eta_min);
    return std::make_unique<LinearWarmup>(optimizer, s.warmup_steps, s.start_factor, cosine);
  }
  const int64_t warmup = s.warmup_steps;
  std::unique_ptr<LRScheduler> inner;  // built first, for the same shared base as above
  switch (s.type) {
    case ScheduleType::Step:
      inner = std::make_unique<StepLR>(optimizer, s.step_size, s.gamma);
      break;
    case ScheduleType::CosineAnnealing:
      inner = std::make_unique<CosineAnnealingLR>(optimizer, s.t_max, s.eta_min);
      break;
    case ScheduleType::Cosine:
      TANDEM_CHECK(total_steps > 0, "lr_scheduler: cosine anneals over the run's steps, which only a trainer knows; "
                   "give cosine_annealing with T_max");
      inner = std::make_unique<CosineAnnealingLR>(optimizer, std::max<int64_t>(total_steps - warmup, 1));
      break;
    default:  // constant
      break;
  }
  if (warmup == 0) return inner;
  return std::make_unique<LinearWarmup>(optimizer, warmup, 1.0 / static_cast<double>(warmup + 1),
                                        std::shared_ptr<LRScheduler>(std::move(inner)));
}

Tensor compute_loss(const LossConfig& loss, const Tensor& output, const Tensor& target) {
  check_loss(loss, kThrow);
  const char* type = enum_name(loss.type);
  const ops::Reduction reduction = loss.reduction;
  if (loss.type == LossType::CrossEntropy) {
    const bool sequence = output.dim() == 3 && target.dim() == 2 && target.size(0) == output.size(0) &&
                          target.size(1) == output.size(1);
    TANDEM_CHECK(sequence || (output.dim() == 2 && target.dim() == 1 && target.size(0) == output.size(0)),
                 "loss cross_entropy: output has shape {} and target {}; expected logits [N, C] and class indices "
                 "[N], or a sequence's logits [N, T, C] and indices [N, T]",
                 shape_str(output.shape()), shape_str(target.shape()));
    TANDEM_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
                 "loss cross_entropy: target has dtype {}; expected class indices (i64)", dtype_name(target.dtype()));
    if (sequence)  // every position a sample
      return ops::cross_entropy(ops::reshape(output, {-1, output.size(2)}), ops::reshape(target, {-1}), -100,
                                reduction);
    return ops::cross_entropy(output, target, -100, reduction);
  }
  TANDEM_CHECK(output.shape() == target.shape(),
               "loss {}: output has shape {} but target has shape {}; give a target of the output's shape", type,
               shape_str(output.shape()), shape_str(target.shape()));
  if (loss.type == LossType::MSE) return ops::mse_loss(output, target, reduction);
  if (loss.type == LossType::BceWithLogits) return ops::binary_cross_entropy_with_logits(output, target, reduction);
  // l1: |d| as relu(d) + relu(-d): differentiable, with gradient 0 at d = 0 (torch's sign(0)).
  const Tensor diff = output - target;
  const Tensor abs = ops::relu(diff) + ops::relu(-diff);
  if (reduction == ops::Reduction::Sum) return ops::sum(abs);
  if (reduction == ops::Reduction::None) return abs;
  return ops::mean(abs);
}

}  // namespace tandem::nn::config
