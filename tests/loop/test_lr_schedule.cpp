// The app's schedule flags reach the library's schedules: the lr sequence per optimizer step for
// step, warmup + constant, warmup + cosine and warmup + step, against their closed forms; and the
// linear scaling rule.
#include <gtest/gtest.h>

#include <cmath>

#include "train/factory.h"
#include "train/lr_schedule.h"

using namespace tandem;
using namespace tandem::train;

using nn::config::ScheduleType;

namespace {

// The lrs of steps 0..n-1 (the lr each optimizer step uses) under the schedule of `cfg`.
std::vector<double> lr_sequence(const TrainConfig& cfg, int64_t total, int64_t n) {
  Tensor w = Tensor::zeros({4});
  w.set_requires_grad(true);
  auto opt = make_optimizer(cfg, {w});
  auto sched = make_lr_schedule(cfg, *opt, total);
  std::vector<double> lrs;
  for (int64_t s = 0; s < n; ++s) {
    lrs.push_back(opt->get_lr());
    if (sched) sched->step();
  }
  return lrs;
}

}  // namespace

TEST(LrSchedule, StepDropsByGammaEveryStepSize) {
  TrainConfig cfg;
  cfg.lr_scheduler.type = ScheduleType::Step;
  cfg.lr_scheduler.step_size = 3;
  cfg.lr_scheduler.gamma = 0.5;
  auto lrs = lr_sequence(cfg, 100, 8);
  const double b = cfg.optimizer.learning_rate;
  std::vector<double> want{b, b, b, b / 2, b / 2, b / 2, b / 4, b / 4};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(lrs[i], want[i]) << "step " << i;
}

TEST(LrSchedule, StepWithoutStepSizeIsAClearError) {
  TrainConfig cfg;
  cfg.lr_scheduler.type = ScheduleType::Step;
  EXPECT_THROW(
      {
        try {
          lr_sequence(cfg, 10, 1);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("step_size"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

TEST(LrSchedule, WarmupRampsLinearlyThenConstant) {
  TrainConfig cfg;
  cfg.lr_scheduler.type = ScheduleType::Constant;
  cfg.lr_scheduler.warmup_steps = 4;
  auto lrs = lr_sequence(cfg, 100, 7);
  const double b = cfg.optimizer.learning_rate;
  for (int s = 0; s < 4; ++s) EXPECT_NEAR(lrs[static_cast<size_t>(s)], b * (s + 1) / 5.0, 1e-15) << "step " << s;
  for (int s = 4; s < 7; ++s) EXPECT_DOUBLE_EQ(lrs[static_cast<size_t>(s)], b) << "step " << s;
}

TEST(LrSchedule, WarmupThenCosineOverTheRemainingSteps) {
  TrainConfig cfg;  // cosine is the default
  cfg.lr_scheduler.warmup_steps = 2;
  const int64_t total = 10;
  auto lrs = lr_sequence(cfg, total, total + 1);
  const double b = cfg.optimizer.learning_rate, pi = std::acos(-1.0);
  EXPECT_NEAR(lrs[0], b / 3, 1e-15);
  EXPECT_NEAR(lrs[1], 2 * b / 3, 1e-15);
  for (int64_t s = 2; s <= total; ++s)
    EXPECT_NEAR(lrs[static_cast<size_t>(s)], b * (1 + std::cos(pi * static_cast<double>(s - 2) / 8.0)) / 2, 1e-15)
        << "step " << s;
  EXPECT_NEAR(lrs.back(), 0.0, 1e-15);  // down to 0 at the last step
}

TEST(LrSchedule, WarmupThenStep) {
  TrainConfig cfg;
  cfg.lr_scheduler.type = ScheduleType::Step;
  cfg.lr_scheduler.step_size = 2;
  cfg.lr_scheduler.gamma = 0.1;
  cfg.lr_scheduler.warmup_steps = 1;
  auto lrs = lr_sequence(cfg, 100, 5);
  const double b = cfg.optimizer.learning_rate;
  EXPECT_NEAR(lrs[0], b / 2, 1e-15);
  EXPECT_DOUBLE_EQ(lrs[1], b);
  EXPECT_DOUBLE_EQ(lrs[2], b);
  EXPECT_NEAR(lrs[3], b * 0.1, 1e-15);
  EXPECT_NEAR(lrs[4], b * 0.1, 1e-15);
}

TEST(LrSchedule, ConstantHasNoScheduler) {
  TrainConfig cfg;
  cfg.lr_scheduler.type = ScheduleType::Constant;
  auto lrs = lr_sequence(cfg, 10, 3);
  for (double lr : lrs) EXPECT_DOUBLE_EQ(lr, cfg.optimizer.learning_rate);
}

TEST(LrSchedule, LinearScalingRuleMultipliesByTheWorldSizeOnlyWhenAsked) {
  TrainConfig cfg;
  cfg.optimizer.learning_rate = 0.1;
  EXPECT_DOUBLE_EQ(scale_lr_with_world(cfg, 4), 0.1);
  cfg.lr_scale_with_world = true;
  EXPECT_DOUBLE_EQ(scale_lr_with_world(cfg, 4), 0.4);
}
