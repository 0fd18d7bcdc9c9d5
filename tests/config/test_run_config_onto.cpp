// A file read onto settings already in force (parse_run_config_onto): what tandem-train does with
// --config over its defaults. The file sets what it writes and nothing else; a model or schedule of
// another type starts from that type's defaults; the schedule's cosine and its warmup.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/config/run_config.h"
#include "nn/optim/sgd.h"
#include "tests/config/config_test_util.h"

using namespace tandem;
using namespace tandem::nn::config;

namespace {

// Settings as a program would have them before its file: an sgd run of a 4-layer mlp with a cosine
// schedule behind 50 warmup steps.
RunConfig program_defaults() {
  RunConfig base;
  base.model.type = "mlp";
  base.model.layer_sizes = {784, 512, 512, 10};
  base.optimizer.type = OptimizerType::SGD;
  base.optimizer.learning_rate = 0.05;
  base.optimizer.momentum = 0.9;
  base.optimizer.weight_decay = 5e-4;
  base.lr_scheduler.type = ScheduleType::Cosine;
  base.lr_scheduler.warmup_steps = 50;
  base.grad_clip = 1.0;
  return base;
}

// The lr of each of the first n optimizer steps of `schedule` over a run of `total` steps.
std::vector<double> lrs(const ScheduleConfig& schedule, int64_t total, int n) {
  Tensor w = Tensor::zeros({2});
  w.set_requires_grad(true);
  nn::SGDOptions o;
  o.lr = 1.0;
  nn::SGD opt({w}, o);
  auto sched = build_scheduler(schedule, opt, total);
  std::vector<double> out;
  for (int s = 0; s < n; ++s) {
    out.push_back(opt.get_lr());
    if (sched) sched->step();
  }
  return out;
}

}  // namespace

TEST(RunConfigOnto, TheFileSetsOnlyWhatItWrites) {
  const RunConfig c = parse_run_config_onto(program_defaults(),
                                            "model: {type: mlp, parameters: {dropout: 0.1}}\n"
                                            "optimizer: {type: sgd, parameters: {learning_rate: 0.2}}\n"
                                            "training: {accumulation_steps: 4}\n",
                                            "run.yaml");
  EXPECT_EQ(c.model.layer_sizes, (std::vector<int64_t>{784, 512, 512, 10}));  // the base's mlp
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 0.2);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.9);  // not written: the base's
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 5e-4);
  EXPECT_EQ(c.lr_scheduler.type, ScheduleType::Cosine);
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 50);
  EXPECT_DOUBLE_EQ(c.grad_clip, 1.0);
  EXPECT_EQ(c.accumulation_steps, 4);
  EXPECT_EQ(c.source, "run.yaml");
  EXPECT_TRUE(c.sets("optimizer.parameters.learning_rate"));
  EXPECT_FALSE(c.sets("optimizer.parameters.momentum"));
}

TEST(RunConfigOnto, AnotherModelOrScheduleStartsFromItsOwnDefaults) {
  const RunConfig c = parse_run_config_onto(program_defaults(),
                                            "model: {type: cnn}\n"
                                            "lr_scheduler: {type: step, parameters: {step_size: 3}}\n",
                                            "run.yaml");
  EXPECT_EQ(c.model.type, "cnn");
  EXPECT_TRUE(c.model.layer_sizes.empty());  // nothing of the base's mlp
  EXPECT_EQ(c.lr_scheduler.type, ScheduleType::Step);
  EXPECT_EQ(c.lr_scheduler.step_size, 3);
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 0);  // the base's cosine warmup went with it

  // The same schedule type keeps the base's parameters the file does not write.
  const RunConfig same = parse_run_config_onto(program_defaults(), "model: {type: cnn}\nlr_scheduler: {type: cosine}\n",
                                               "run.yaml");
  EXPECT_EQ(same.lr_scheduler.warmup_steps, 50);
}

// torch.optim.AdamW's weight decay (1e-2) where the file switches to adamw and does not say; a base
// that already is adamw keeps its own.
TEST(RunConfigOnto, AdamwDefaultWeightDecayOnlyWhereTheFileSwitchesToIt) {
  const std::string adamw = "model: {type: cnn}\noptimizer: {type: AdamW}\n";
  EXPECT_DOUBLE_EQ(parse_run_config_onto(program_defaults(), adamw, "a.yaml").optimizer.weight_decay, 1e-2);
  RunConfig gpt_like = program_defaults();
  gpt_like.optimizer.type = OptimizerType::AdamW;
  gpt_like.optimizer.weight_decay = 0.1;
  EXPECT_DOUBLE_EQ(parse_run_config_onto(gpt_like, adamw, "a.yaml").optimizer.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(parse_run_config(adamw).optimizer.weight_decay, 1e-2);  // onto RunConfig{}'s adam
}

TEST(RunConfigOnto, ErrorsStillNameTheFileLineAndKey) {
  tandem::testing::expect_contains(
      tandem::testing::value_error_of([] {
        parse_run_config_onto(program_defaults(), "model: {type: cnn}\ntraining:\n  amp: fp4\n", "run.yaml");
      }),
      {"run.yaml:3: training.amp: unknown amp setting 'fp4' (expected off, f16 or bf16)"});
}

// cosine: down to 0 at the run's last step, after the warmup; a program without a run length (the C
// API) is told to give cosine_annealing.
TEST(RunConfigSchedule, CosineOverTheRunAfterItsWarmup) {
  ScheduleConfig s;
  s.type = ScheduleType::Cosine;
  s.warmup_steps = 2;
  const std::vector<double> lr = lrs(s, 10, 11);
  const double pi = std::acos(-1.0);
  EXPECT_NEAR(lr[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(lr[1], 2.0 / 3, 1e-15);
  for (int t = 2; t <= 10; ++t)
    EXPECT_NEAR(lr[static_cast<size_t>(t)], (1 + std::cos(pi * (t - 2) / 8.0)) / 2, 1e-15) << "step " << t;
  Tensor w = Tensor::zeros({2});
  w.set_requires_grad(true);
  nn::SGD opt({w}, nn::SGDOptions{});
  tandem::testing::expect_contains(tandem::testing::value_error_of([&] { build_scheduler(s, opt); }),
                                   {"cosine anneals over the run's steps", "cosine_annealing with T_max"});
}

// A file's step schedule with warmup_steps: the same warmup in front as tandem-train's --warmup-steps.
TEST(RunConfigSchedule, WarmupInFrontOfAStepScheduleFromAFile) {
  const RunConfig c = parse_run_config(
      "model: {type: cnn}\nlr_scheduler: {type: step, parameters: {step_size: 2, gamma: 0.1, warmup_steps: 1}}\n");
  const std::vector<double> lr = lrs(c.lr_scheduler, 100, 5);
  EXPECT_NEAR(lr[0], 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(lr[1], 1.0);
  EXPECT_DOUBLE_EQ(lr[2], 1.0);
  EXPECT_NEAR(lr[3], 0.1, 1e-15);
  EXPECT_NEAR(lr[4], 0.1, 1e-15);
  EXPECT_THROW(parse_run_config("model: {type: cnn}\nlr_scheduler: {type: step, parameters: {step_size: 2, "
                                "warmup_steps: -1}}\n"),
               ValueError);
}
