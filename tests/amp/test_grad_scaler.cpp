// GradScaler against torch.cuda.amp.GradScaler's documented rules (torch/cuda/amp/grad_scaler.py
// and _amp_update_scale_): a step with inf/nan gradients is skipped and the scale is multiplied by
// backoff_factor with the growth tracker reset; growth_interval consecutive clean steps multiply
// it by growth_factor. Also: defaults, unscale_, misuse errors, state_dict, and the found-inf flag
// agreeing across ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "comm/communicator.h"
#include "nn/amp/grad_scaler.h"
#include "nn/optim/fused_adam.h"
#include "nn/optim/sgd.h"
#include "runtime/autograd.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
struct Fixture {
  Tensor w = Tensor::from_vector<float>({1.0f, 2.0f, 3.0f}, {3});
  std::unique_ptr<SGD> opt;
  Fixture() {
    w.set_requires_grad(true);
    SGDOptions o;
    o.lr = 0.5;
    opt = std::make_unique<SGD>(std::vector<Tensor>{w}, o);
  }
  // backward of scale(sum(w * c)): grad = c * scale; `inject` puts inf (or nan) in it.
  void backward(GradScaler& s, bool inject, bool nan = false) {
    opt->zero_grad();
    Tensor c = Tensor::from_vector<float>({1.0f, -1.0f, 0.5f}, {3});
    Tensor loss = ops::sum(w * c);
    s.scale(loss).backward();
    if (inject) w.grad().data<float>()[1] = nan ? std::nanf("") : -std::numeric_limits<float>::infinity();
  }
};
}  // namespace

TEST(GradScaler, DefaultsArePyTorchs) {
  GradScaler s;
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.options().growth_factor, 2.0);
  EXPECT_EQ(s.options().backoff_factor, 0.5);
  EXPECT_EQ(s.options().growth_interval, 2000);
  Fixture st;
  for (int i = 0; i < 1999; ++i) {
    st.backward(s, false);
    ASSERT_TRUE(s.step(*st.opt));
    s.update();
  }
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1999);
  st.backward(s, false);
  s.step(*st.opt);
  s.update();
  EXPECT_EQ(s.get_scale(), 131072.0) << "grows after 2000 clean steps";
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, SkipBackoffGrowthSequence) {
  GradScalerOptions o;
  o.init_scale = 1024.0;
  o.growth_interval = 3;
  GradScaler s(o);
  Fixture st;
  // (inject inf?, expected stepped, expected scale after update, expected tracker)
  struct Row { bool inf; bool stepped; double scale; int64_t tracker; };
  const Row rows[] = {
      {false, true, 1024, 1}, {false, true, 1024, 2}, {false, true, 2048, 0},  // grows on the 3rd
      {true, false, 1024, 0},                                                 // backoff, reset
      {false, true, 1024, 1}, {true, false, 512, 0},  {true, false, 256, 0},   // consecutive infs
      {false, true, 256, 1},  {false, true, 256, 2},  {false, true, 512, 0},
  };
  int64_t steps = 0;
  for (const Row& r : rows) {
    std::vector<float> before = st.w.to_vector<float>();
    st.backward(s, r.inf, /*nan=*/steps % 2 == 1);
    bool stepped = s.step(*st.opt);
    EXPECT_EQ(stepped, r.stepped);
    EXPECT_EQ(s.found_inf(), r.inf);
    if (stepped) {
      ++steps;
      // The update used unscaled gradients: w -= 0.5 * c.
      std::vector<float> after = st.w.to_vector<float>();
      EXPECT_FLOAT_EQ(after[0], before[0] - 0.5f);
      EXPECT_FLOAT_EQ(after[1], before[1] + 0.5f);
    } else {
      EXPECT_EQ(st.w.to_vector<float>(), before) << "a skipped step leaves the parameters";
    }
    s.update();
    EXPECT_EQ(s.get_scale(), r.scale);
    EXPECT_EQ(s.growth_tracker(), r.tracker);
  }
  EXPECT_EQ(st.opt->step_count(), steps);
}

TEST(GradScaler, UnscaleThenClipAndMisuse) {
  GradScaler s;
  Fixture st;
  st.backward(s, false);
  EXPECT_EQ(st.w.grad().to_vector<float>()[0], 65536.0f);
  s.unscale_(*st.opt);
  EXPECT_EQ(st.w.grad().to_vector<float>(), (std::vector<float>{1.0f, -1.0f, 0.5f}));
  EXPECT_THROW(s.unscale_(*st.opt), ValueError) << "unscale_ twice per step";
  s.step(*st.opt);
  EXPECT_THROW(s.step(*st.opt), ValueError) << "step twice per update";
  s.update();
  EXPECT_THROW(s.update(), ValueError) << "update without a step";
}

TEST(GradScaler, StateDictRoundTrip) {
  GradScalerOptions o;
  o.init_scale = 4096;
  o.growth_interval = 7;
  GradScaler a(o);
  Fixture st;
  for (int i = 0; i < 3; ++i) {
    st.backward(a, i == 1);
    a.step(*st.opt);
    a.update();
  }
  NamedTensors sd = a.state_dict();
  GradScaler b;
  b.load_state_dict(sd);
  EXPECT_EQ(b.get_scale(), a.get_scale());
  EXPECT_EQ(b.growth_tracker(), a.growth_tracker());
  EXPECT_EQ(b.options().growth_interval, 7);
  NamedTensors bad = sd;
  bad.emplace_back("extra", Tensor::scalar(1.0));
  EXPECT_THROW(b.load_state_dict(bad), ValueError);
}

TEST(GradScaler, DisabledIsAPlainStep) {
  GradScalerOptions o;
  o.enabled = false;
  GradScaler s(o);
  Fixture st;
  st.backward(s, false);
  EXPECT_EQ(st.w.grad().to_vector<float>()[0], 1.0f);
  EXPECT_TRUE(s.step(*st.opt));
  s.update();
  EXPECT_EQ(s.get_scale(), 1.0);
}

TEST(GradScaler, FoundInfAgreesAcrossRanks) {
  // Rank 0 sees an inf, rank 1 does not: both must skip and back off (local in-process group).
  auto group = comm::make_local_group(2);
  bool stepped[2] = {true, true};
  double scale[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      GradScaler s({}, group[static_cast<size_t>(r)].get());
      Fixture st;
      st.backward(s, r == 0);
      stepped[r] = s.step(*st.opt);
      s.update();
      scale[r] = s.get_scale();
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(stepped[0]);
  EXPECT_FALSE(stepped[1]);
  EXPECT_EQ(scale[0], 32768.0);
  EXPECT_EQ(scale[1], 32768.0);
}

TEST(GradScaler, FusedOptimizerPathAgreesAcrossRanks) {
  auto group = comm::make_local_group(2);
  bool stepped[2] = {true, true};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      GradScaler s({}, group[static_cast<size_t>(r)].get());
      Tensor w = Tensor::ones({4});
      w.set_requires_grad(true);
      FusedAdam opt(std::vector<Tensor>{w}, AdamOptions{});
      s.scale(ops::sum(w)).backward();
      if (r == 1) w.grad().data<float>()[2] = std::nanf("");
      stepped[r] = s.step(opt);
      s.update();
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(stepped[0]);
  EXPECT_FALSE(stepped[1]);
}
