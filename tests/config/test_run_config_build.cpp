// The builders of a run config: models (the mlp as nn::make_mlp, sequential layers' parameter
// shapes), every optimizer with its hyperparameters, every schedule against its formula, and the
// losses against hand-computed values, with the l1 gradient finite-difference checked.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "nn/optim/fused_adam.h"
#include "nn/optim/fused_sgd.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"
#include "tests/config/config_test_util.h"
#include "tests/support/gradcheck.h"

using namespace tandem;
using namespace tandem::nn;
using namespace tandem::nn::config;
using tandem::testing::expect_contains;
using tandem::testing::value_error_of;

namespace {

std::vector<std::pair<std::string, Shape>> param_shapes(const Module& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.shape());
  return out;
}

void expect_same_state(const Module& a, const Module& b) {
  NamedTensors sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(sa[i].second.to_vector<double>(), sb[i].second.to_vector<double>()) << sa[i].first;
  }
}

Tensor f32(const std::vector<double>& v, const Shape& shape) { return Tensor::from_vector(v, shape, DType::f32); }

std::vector<Tensor> two_params() {
  Tensor a = Tensor::ones({3}, DType::f32), b = Tensor::ones({2, 2}, DType::f32);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  return {a, b};
}

}  // namespace

TEST(RunConfigBuild, MlpIsMakeMlpForItsSizes) {
  ModelConfig m;
  m.type = "mlp";
  m.layer_sizes = {784, 512, 512, 10};
  Generator g1(7), g2(7);
  auto built = build_model(m, g1);
  expect_same_state(*built, *make_mlp(g2));  // same names, same draws
}

TEST(RunConfigBuild, MlpDropoutAndFlattenedInputs) {
  ModelConfig m;
  m.layer_sizes = {12, 8, 3};
  m.dropout = 0.5;
  Generator gen(1);
  auto model = std::dynamic_pointer_cast<Sequential>(build_model(m, gen));
  ASSERT_TRUE(model);
  ASSERT_EQ(model->size(), 4u);
  EXPECT_EQ(model->at(0)->type_name(), "Linear");
  EXPECT_EQ(model->at(1)->type_name(), "ReLU");
  EXPECT_EQ(model->at(2)->type_name(), "Dropout");
  EXPECT_EQ(model->at(3)->type_name(), "Linear");
  EXPECT_EQ(param_shapes(*model), (std::vector<std::pair<std::string, Shape>>{
                                      {"0.weight", {8, 12}}, {"0.bias", {8}}, {"3.weight", {3, 8}}, {"3.bias", {3}}}));
  // TorchFort's flatten_non_batch_dims (default true): [N, 3, 4] inputs train as [N, 12], clones too.
  model->eval();
  Tensor x = rand_uniform({2, 3, 4}, -1.0, 1.0, gen);
  Tensor y = (*model)(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ((*model->clone())(x).to_vector<float>(), y.to_vector<float>());
  m.flatten_non_batch_dims = false;
  auto plain = build_model(m, gen);
  EXPECT_THROW((*plain)(x), ValueError);  // Linear(12, 8) sees a last dim of 4
}

TEST(RunConfigBuild, SequentialParameterShapes) {
  RunConfig c = parse_run_config(R"(model:
  type: sequential
  parameters:
    layers:
      - {type: conv2d, in_channels: 1, out_channels: 4, kernel_size: 3, padding: 1, bias: false}
      - {type: batchnorm2d, num_features: 4}
      - {type: relu}
      - {type: maxpool2d, kernel_size: 2}
      - {type: flatten}
      - {type: linear, in_features: 64, out_features: 10}
)");
  Generator gen(0);
  auto model = build_model(c.model, gen);
  EXPECT_EQ(param_shapes(*model), (std::vector<std::pair<std::string, Shape>>{{"0.weight", {4, 1, 3, 3}},
                                                                              {"1.weight", {4}},
                                                                              {"1.bias", {4}},
                                                                              {"5.weight", {10, 64}},
                                                                              {"5.bias", {10}}}));
  EXPECT_EQ((*model)(rand_uniform({2, 1, 8, 8}, -1.0, 1.0, gen)).shape(), (Shape{2, 10}));

  RunConfig t = parse_run_config(R"(model:
  type: sequential
  parameters:
    layers:
      - {type: embedding, num_embeddings: 10, embedding_dim: 4}
      - {type: layernorm, normalized_shape: 4}
      - {type: gelu, approximate: tanh}
      - {type: dropout, p: 0.1}
      - {type: linear, in_features: 4, out_features: 2, bias: false}
)");
  auto text_model = build_model(t.model, gen);
  EXPECT_EQ(param_shapes(*text_model),
            (std::vector<std::pair<std::string, Shape>>{
                {"0.weight", {10, 4}}, {"1.weight", {4}}, {"1.bias", {4}}, {"4.weight", {2, 4}}}));
  Tensor tokens = Tensor::from_vector(std::vector<int64_t>{1, 5, 9}, {3}, DType::i64);
  EXPECT_EQ((*text_model)(tokens).shape(), (Shape{3, 2}));
}

TEST(RunConfigBuild, CnnIsMakeCnn) {
  ModelConfig m;
  m.type = "cnn";
  Generator g1(3), g2(3);
  expect_same_state(*build_model(m, g1), *make_cnn(g2));
}

// type gpt is nn::GPT of the file's shape (defaults: tandem-train's), drawn from gen as nn::GPT is;
// its logits [N, T, V] against ids [N, T] give cross_entropy over every position.
TEST(RunConfigBuild, GptIsNnGptAndItsLossCountsEveryPosition) {
  const RunConfig rc = parse_run_config("model:\n  type: gpt\n  parameters: {n_layer: 1, n_head: 2, n_embd: 16, "
                                        "context: 8, vocab_size: 40}\nloss: {type: cross_entropy}\n");
  Generator g1(3), g2(3);
  auto built = build_model(rc.model, g1);
  GPTConfig c;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.context = 8, c.vocab_size = 40;
  GPT direct(c, g2);
  expect_same_state(*built, direct);
  EXPECT_EQ(parse_run_config("model: {type: gpt}\n").model.gpt.n_embd, 256);  // tandem-train's default shape
  std::vector<int64_t> ids(2 * 8), targets(2 * 8);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 40), targets[i] = static_cast<int64_t>(i % 40);
  const Tensor logits = built->forward(Tensor::from_vector(ids, {2, 8}));
  ASSERT_EQ(logits.shape(), (Shape{2, 8, 40}));
  const Tensor loss = compute_loss(rc.loss, logits, Tensor::from_vector(targets, {2, 8}));
  const Tensor flat = ops::cross_entropy(ops::reshape(logits, {16, 40}), Tensor::from_vector(targets, {16}));
  EXPECT_EQ(loss.item(), flat.item());
  expect_contains(value_error_of([&] { compute_loss(rc.loss, logits, Tensor::from_vector(targets, {16})); }),
                  {"or a sequence's logits [N, T, C] and indices [N, T]"});
}

// DecayOn::Matrices: weight decay on the >= 2-dim parameters only, for every optimizer type.
TEST(RunConfigBuild, DecayOnMatricesOnly) {
  for (const char* type : {"sgd", "adam", "adamw"}) {
    for (bool fused : {false, true}) {
      OptimizerConfig o;
      o.type = *enum_value<OptimizerType>(type);
      o.fused = fused;
      o.learning_rate = 0.5;
      o.weight_decay = 0.25;
      std::vector<Tensor> params = two_params();  // a [3] vector and a [2, 2] matrix
      auto all = build_optimizer(o, params);
      ASSERT_EQ(all->param_groups().size(), 1u);
      EXPECT_EQ(all->param_groups()[0].weight_decay, 0.25);
      auto matrices = build_optimizer(o, params, DecayOn::Matrices);
      ASSERT_EQ(matrices->param_groups().size(), 2u) << type;
      EXPECT_EQ(matrices->param_groups()[0].params.size(), 1u);
      EXPECT_EQ(matrices->param_groups()[0].params[0].dim(), 2);
      EXPECT_EQ(matrices->param_groups()[0].weight_decay, 0.25);
      EXPECT_EQ(matrices->param_groups()[1].weight_decay, 0.0);
      EXPECT_EQ(matrices->param_groups()[1].lr, 0.5);
    }
  }
}

TEST(RunConfigBuild, OptimizersCarryTheirHyperparameters) {
  OptimizerConfig sgd;
  sgd.type = OptimizerType::SGD;
  sgd.learning_rate = 0.2;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-3;
  sgd.nesterov = true;
  for (bool fused : {false, true}) {
    sgd.fused = fused;
    auto opt = build_optimizer(sgd, two_params());
    EXPECT_EQ(opt->type_name(), fused ? "FusedSGD" : "SGD");
    EXPECT_DOUBLE_EQ(opt->get_lr(), 0.2);
    EXPECT_DOUBLE_EQ(opt->param_groups()[0].weight_decay, 1e-3);
    const SGDOptions& o = fused ? dynamic_cast<FusedSGD&>(*opt).options() : dynamic_cast<SGD&>(*opt).options();
    EXPECT_DOUBLE_EQ(o.momentum, 0.9);
    EXPECT_DOUBLE_EQ(o.dampening, 0.0);
    EXPECT_TRUE(o.nesterov);
  }
  OptimizerConfig adam;
  adam.learning_rate = 0.01;
  adam.beta1 = 0.8;
  adam.beta2 = 0.95;
  adam.eps = 1e-6;
  adam.weight_decay = 0.1;
  for (const char* type : {"adam", "adamw"}) {
    for (bool fused : {false, true}) {
      adam.type = *enum_value<OptimizerType>(type);
      adam.fused = fused;
      auto opt = build_optimizer(adam, two_params());
      const bool decoupled = std::string(type) == "adamw";
      EXPECT_EQ(opt->type_name(), std::string(fused ? "Fused" : "") + (decoupled ? "AdamW" : "Adam"));
      EXPECT_DOUBLE_EQ(opt->get_lr(), 0.01);
      EXPECT_DOUBLE_EQ(opt->param_groups()[0].weight_decay, 0.1);
      const AdamOptions& o = fused ? dynamic_cast<FusedAdam&>(*opt).options() : dynamic_cast<Adam&>(*opt).options();
      EXPECT_DOUBLE_EQ(o.beta1, 0.8);
      EXPECT_DOUBLE_EQ(o.beta2, 0.95);
      EXPECT_DOUBLE_EQ(o.eps, 1e-6);
    }
  }
  // One SGD step applies lr and weight decay: p - lr * (g + wd * p), here with g = 1, p = 1.
  OptimizerConfig plain;
  plain.type = OptimizerType::SGD;
  plain.learning_rate = 0.5;
  plain.weight_decay = 0.1;
  std::vector<Tensor> params = two_params();
  auto opt = build_optimizer(plain, params);
  for (Tensor& p : params) p.set_grad(Tensor::ones(p.shape()));
  opt->step();
  EXPECT_FLOAT_EQ(params[0].to_vector<float>()[0], 1.0f - 0.5f * 1.1f);

  plain.learning_rate = -1.0;
  expect_contains(value_error_of([&] { build_optimizer(plain, params); }),
                  {"optimizer.parameters.learning_rate: must be > 0, got -1"});
}

TEST(RunConfigBuild, SchedulesFollowTheirFormulas) {
  const double lr = 0.4, pi = std::acos(-1.0);
  OptimizerConfig oc;
  oc.type = OptimizerType::SGD;
  oc.learning_rate = lr;
  auto lr_after = [&](const ScheduleConfig& s, int steps) {
    auto opt = build_optimizer(oc, two_params());
    auto sched = build_scheduler(s, *opt);
    for (int k = 0; k < steps; ++k) sched->step();
    return opt->get_lr();
  };
  ScheduleConfig constant;
  auto opt = build_optimizer(oc, two_params());
  EXPECT_EQ(build_scheduler(constant, *opt), nullptr);

  ScheduleConfig step;
  step.type = ScheduleType::Step;
  step.step_size = 3;
  step.gamma = 0.5;
  for (int k : {0, 2, 3, 7}) EXPECT_DOUBLE_EQ(lr_after(step, k), lr * std::pow(0.5, k / 3)) << k;

  ScheduleConfig cosine;
  cosine.type = ScheduleType::CosineAnnealing;
  cosine.t_max = 10;
  cosine.eta_min = 0.01;
  for (int k : {0, 3, 10})
    EXPECT_NEAR(lr_after(cosine, k), 0.01 + (lr - 0.01) * (1 + std::cos(pi * k / 10)) / 2, 1e-12) << k;

  ScheduleConfig warmup;
  warmup.type = ScheduleType::LinearWarmup;
  warmup.warmup_steps = 4;
  warmup.start_factor = 0.25;
  for (int k : {0, 1, 3}) EXPECT_NEAR(lr_after(warmup, k), lr * (0.25 + 0.75 * k / 4.0), 1e-12) << k;
  EXPECT_DOUBLE_EQ(lr_after(warmup, 9), lr);  // constant after the warmup
  warmup.t_max = 6;                           // then a cosine over 6 steps, counted from the warmup's end
  for (int k : {4, 6, 10}) EXPECT_NEAR(lr_after(warmup, k), lr * (1 + std::cos(pi * (k - 4) / 6)) / 2, 1e-12) << k;

  cosine.t_max = 0;
  expect_contains(value_error_of([&] { build_scheduler(cosine, *opt); }),
                  {"lr_scheduler.parameters.T_max: must be >= 1"});
}

TEST(RunConfigBuild, LossesMatchHandComputedValues) {
  Tensor out = f32({1, 2, 3, 4}, {2, 2}), target = f32({0, 2, 5, 3}, {2, 2});  // differences 1, 0, -2, 1
  LossConfig mse{LossType::MSE, ops::Reduction::Mean};
  EXPECT_FLOAT_EQ(compute_loss(mse, out, target).item(), 1.5f);  // (1 + 0 + 4 + 1) / 4
  mse.reduction = ops::Reduction::Sum;
  EXPECT_FLOAT_EQ(compute_loss(mse, out, target).item(), 6.0f);
  mse.reduction = ops::Reduction::None;
  EXPECT_EQ(compute_loss(mse, out, target).to_vector<float>(), (std::vector<float>{1, 0, 4, 1}));

  LossConfig l1{LossType::L1, ops::Reduction::Mean};
  EXPECT_FLOAT_EQ(compute_loss(l1, out, target).item(), 1.0f);  // (1 + 0 + 2 + 1) / 4
  l1.reduction = ops::Reduction::Sum;
  EXPECT_FLOAT_EQ(compute_loss(l1, out, target).item(), 4.0f);
  l1.reduction = ops::Reduction::None;
  Tensor none = compute_loss(l1, out, target);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  EXPECT_EQ(none.to_vector<float>(), (std::vector<float>{1, 0, 2, 1}));

  // cross_entropy: -log softmax(logits)[target], by hand.
  Tensor logits = f32({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor classes = Tensor::from_vector(std::vector<int64_t>{2, 0}, {2}, DType::i64);
  const double e = std::exp(1.0);
  const double l0 = std::log(e + e * e + e * e * e) - 3.0, l1v = std::log(3.0);
  LossConfig ce{LossType::CrossEntropy, ops::Reduction::Mean};
  EXPECT_NEAR(compute_loss(ce, logits, classes).item(), (l0 + l1v) / 2, 1e-6);
  ce.reduction = ops::Reduction::None;
  tandem::testing::expect_close(compute_loss(ce, logits, classes), {l0, l1v}, 1e-6);

  expect_contains(value_error_of([&] { compute_loss(LossConfig{LossType::MSE, ops::Reduction::Mean}, out, f32({1, 2, 3, 4}, {4})); }),
                  {"[2, 2]", "[4]"});
  const LossConfig ce_mean{LossType::CrossEntropy, ops::Reduction::Mean};
  expect_contains(value_error_of([&] { compute_loss(ce_mean, logits, f32({1, 2, 3}, {3})); }), {"[2, 3]", "[3]"});
  expect_contains(value_error_of([&] { compute_loss(LossConfig{static_cast<LossType>(99), ops::Reduction::Mean}, out, target); }), {"loss.type"});
}

TEST(RunConfigBuild, L1GradientAwayFromZeroAndAtZero) {
  Tensor out = tandem::testing::random_leaf({3, 4}, 11);
  std::vector<double> tv = out.to_vector<double>();
  for (size_t i = 0; i < tv.size(); ++i) tv[i] += i % 2 ? 0.3 : -0.4;  // |output - target| >= 0.3
  Tensor target = Tensor::from_vector(tv, {3, 4}, DType::f64);
  for (ops::Reduction reduction : {ops::Reduction::Mean, ops::Reduction::Sum, ops::Reduction::None}) {
    SCOPED_TRACE(enum_name(reduction));
    LossConfig l1{LossType::L1, reduction};
    tandem::testing::expect_gradcheck([&](const std::vector<Tensor>& in) { return compute_loss(l1, in[0], target); },
                                      {out});
  }
  // At a difference of 0 the gradient is 0, as torch's sign(0).
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}, DType::f64);
  x.set_requires_grad(true);
  compute_loss(LossConfig{LossType::L1, ops::Reduction::Mean}, x, Tensor::from_vector(std::vector<double>{1, 3}, {2}, DType::f64)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.0, -0.5}));
}
