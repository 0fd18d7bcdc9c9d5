// The Trainer in process on a synthetic, learnable dataset (10 noisy class templates), so it runs
// without the real data: the mlp's loss falls over a few hundred steps, evaluation sees it learn,
// callbacks fire in order, and max_steps stops mid-epoch.
#include <gtest/gtest.h>

#include <numeric>

#include "nn/model_registry.h"
#include "train/factory.h"
#include "train/threads.h"
#include "train/trainer.h"
#include "runtime/random.h"
#include "tests/support/synthetic_images.h"

using namespace tandem;
using namespace tandem::train;

namespace {

data::Dataset synthetic(int64_t n, uint64_t seed) { return tandem::testing::synthetic_images(n, seed); }

struct Recorder : TrainerCallback {
  std::vector<double> losses;
  std::vector<std::string> events;
  void on_train_begin(Trainer&) override { events.push_back("begin"); }
  void on_epoch_begin(Trainer&, int64_t e) override { events.push_back("epoch" + std::to_string(e)); }
  void after_step(Trainer& t) override { losses.push_back(t.last_loss()); }
  void on_epoch_end(Trainer&, const EpochStats& s) override { events.push_back("end" + std::to_string(s.epoch)); }
  void on_train_end(Trainer&, const TrainResult&) override { events.push_back("done"); }
};

double mean(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to), 0.0) /
         static_cast<double>(to - from);
}

}  // namespace

TEST(Trainer, MlpLossFallsOverAFewHundredSteps) {
  apply_threads(1);  // ctest runs tests side by side on few cores
  TrainConfig cfg;
  cfg.model = nn::default_model_config("mlp");
  cfg.epochs = 2;
  cfg.batch_size = 32;
  cfg.optimizer.learning_rate = 0.01;
  cfg.lr_scheduler.type = nn::config::ScheduleType::Constant;
  cfg.eval_batch_size = 250;
  cfg.quiet = true;
  auto model = make_model(cfg);
  Trainer t(cfg, model, make_optimizer(cfg, model->parameters()), synthetic(4800, 1), synthetic(500, 2));
  auto rec = std::make_shared<Recorder>();
  t.add_callback(rec);
  TrainResult r = t.fit();
  ASSERT_EQ(r.steps, 300);
  ASSERT_EQ(rec->losses.size(), 300u);
  double first = mean(rec->losses, 0, 30), last = mean(rec->losses, 270, 300);
  EXPECT_GT(first, 1.0);         // starts near ln(10) = 2.3
  EXPECT_LT(last, 0.3 * first);  // and falls well below it
  EXPECT_LT(r.history[1].train_loss, r.history[0].train_loss);
  EXPECT_TRUE(r.evaluated);
  EXPECT_GT(r.test_acc, 0.9);
  EXPECT_EQ(rec->events, (std::vector<std::string>{"begin", "epoch0", "end1", "epoch1", "end2", "done"}));
}

TEST(Trainer, MaxStepsStopsMidEpochAndSameSeedRepeats) {
  apply_threads(1);
  TrainConfig cfg;
  cfg.epochs = 3;
  cfg.batch_size = 50;
  cfg.max_steps = 7;
  cfg.eval = false;
  cfg.quiet = true;
  auto run = [&] {
    auto model = make_model(cfg);
    Trainer t(cfg, model, make_optimizer(cfg, model->parameters()), synthetic(1000, 3), synthetic(100, 4));
    auto rec = std::make_shared<Recorder>();
    t.add_callback(rec);
    TrainResult r = t.fit();
    EXPECT_EQ(r.steps, 7);
    EXPECT_EQ(r.epochs, 1);
    EXPECT_EQ(t.state().step, 7);
    EXPECT_EQ(t.state().epoch, 0);  // stopped mid-epoch: a checkpoint here resumes at batch 7
    EXPECT_EQ(t.state().batch_in_epoch, 7);
    EXPECT_FALSE(r.evaluated);
    return rec->losses;
  };
  auto a = run(), b = run();
  EXPECT_EQ(a, b);  // same seed: same initialisation and batch order, bitwise
}
