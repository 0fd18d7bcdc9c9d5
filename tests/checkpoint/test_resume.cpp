// Resume: a run stopped after step k, saved, rebuilt from scratch (other initial weights), loaded
// and continued to step n ends bitwise equal to a run that never stopped: weights, optimizer
// moments (fused AdamW with f16 master weights, or Adam), GradScaler scale, LR schedule, EMA,
// dropout masks (Philox offset) and sampler position all continue. Also: resuming with another
// world size at the same global batch visits the same samples.
#include <gtest/gtest.h>

#include <cstring>

#include "nn/checkpoint_sequential.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "nn/optim/fused_adam.h"
#include "nn/parallel/distributed_sampler.h"
#include "nn/training_state.h"
#include "runtime/autocast.h"
#include "runtime/ops.h"
#include "tests/checkpoint/temp_dir.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
constexpr int64_t kData = 64, kBatch = 8;

struct Trainer {
  std::shared_ptr<Sequential> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<LRScheduler> sched;
  std::unique_ptr<EMA> ema;
  bool fused;
  Trainer(uint64_t init_seed, bool fused_opt) : fused(fused_opt) {
    Generator g(init_seed);
    model = std::make_shared<Sequential>();
    model->emplace_back<Linear>(8, 16, true, g);
    model->emplace_back<ReLU>();
    model->emplace_back<Dropout>(0.25);
    model->emplace_back<Linear>(16, 16, true, g);
    model->emplace_back<ReLU>();
    model->emplace_back<Linear>(16, 4, true, g);
    AdamOptions ao;
    ao.lr = 1e-2;
    if (fused) {
      FusedOptions fo;
      fo.max_grad_norm = 1.0;
      fo.master_weights = true;
      model->to(DType::bf16);  // a bf16 model with f32 master weights in the optimizer
      opt = std::make_unique<FusedAdamW>(model->parameters(), ao, fo);
    } else {
      opt = std::make_unique<Adam>(model->parameters(), ao);
    }
    scaler = std::make_unique<GradScaler>(GradScalerOptions{1024.0, 2.0, 0.5, 3, true});
    sched = std::make_unique<LinearWarmup>(*opt, 5, 0.25);
    ema = std::make_unique<EMA>(*model, EMAOptions{0.9, 2});
  }
  TrainComponents components() { return {model.get(), opt.get(), scaler.get(), sched.get(), ema.get(), nullptr}; }
};

struct Data {
  std::vector<float> x;
  std::vector<int64_t> y;
  Data() {
    Generator g(99);
    x = rand_uniform({kData, 8}, -1, 1, g).to_vector<float>();
    Tensor yt = rand_uniform({kData}, 0, 4, g);
    for (double v : yt.to_vector<double>()) y.push_back(static_cast<int64_t>(v));
  }
};

// Steps [from, to) on `world` ranks' worth of samples (1 rank here: the global batch in one).
void train(Trainer& r, const Data& d, int64_t from, int64_t to, bool amp) {
  parallel::DistributedSampler sampler(kData, 1, 0, {true, 5, false});
  const int64_t per_epoch = kData / kBatch;
  for (int64_t step = from; step < to; ++step) {
    const int64_t epoch = step / per_epoch, pos = (step % per_epoch) * kBatch;
    std::vector<int64_t> idx = sampler.indices(epoch);
    std::vector<float> xb;
    std::vector<int64_t> yb;
    for (int64_t i = pos; i < pos + kBatch; ++i) {
      int64_t k = idx[static_cast<size_t>(i)];
      xb.insert(xb.end(), d.x.begin() + k * 8, d.x.begin() + (k + 1) * 8);
      yb.push_back(d.y[static_cast<size_t>(k)]);
    }
    Tensor x = Tensor::from_vector(xb, {kBatch, 8}, r.fused ? DType::bf16 : DType::f32);
    Tensor y = Tensor::from_vector(yb, {kBatch});
    Tensor loss;
    {
      std::optional<AutocastGuard> ac;
      if (amp) ac.emplace(DType::f16);
      loss = ops::cross_entropy(checkpoint_sequential(*r.model, 2, x), y);
    }
    // An overflow now and then exercises the skip/backoff path.
    r.scaler->scale(loss).backward();
    if (step % 7 == 3) r.model->parameters()[0].grad().fill_(std::numeric_limits<double>::infinity());
    r.scaler->step(*r.opt);
    r.scaler->update();
    r.sched->step();
    r.ema->update(*r.model);
    r.model->zero_grad();
  }
}

void expect_bitwise(const NamedTensors& a, const NamedTensors& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second.nbytes(), b[i].second.nbytes());
    EXPECT_EQ(std::memcmp(a[i].second.data_ptr(), b[i].second.data_ptr(), a[i].second.nbytes()), 0)
        << what << ": " << a[i].first;
  }
}
}  // namespace

TEST(Resume, BitwiseAsIfNeverStopped) {
  Data d;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused AdamW, bf16 model, f32 masters" : "Adam, f16 autocast");
    const bool amp = !fused;
    const int64_t k = 11, n = 20;
    manual_seed(42);
    Trainer a(1, fused);
    train(a, d, 0, n, amp);
    const uint64_t offset_a = default_generator().offset();

    TempDir dir;
    manual_seed(42);
    Trainer b(1, fused);
    train(b, d, 0, k, amp);
    TrainProgress p;
    p.step = k;
    p.epoch = k / (kData / kBatch);
    p.sampler_position = (k % (kData / kBatch)) * kBatch;
    p.global_batch = kBatch;
    save_training_state(dir.path, b.components(), p);

    manual_seed(42);  // a fresh process: same seed, offset 0, different initial weights
    Trainer c(2, fused);
    TrainProgress q = load_training_state(dir.path, c.components(), kBatch);
    EXPECT_EQ(q.step, k);
    EXPECT_EQ(q.sampler_position, p.sampler_position);
    train(c, d, q.step, n, amp);

    expect_bitwise(a.model->state_dict(), c.model->state_dict(), "weights");
    expect_bitwise(a.opt->state_tensors(), c.opt->state_tensors(), "optimizer");
    expect_bitwise(a.ema->state_tensors(), c.ema->state_tensors(), "ema");
    EXPECT_EQ(a.scaler->get_scale(), c.scaler->get_scale());
    EXPECT_EQ(a.opt->get_lr(), c.opt->get_lr());
    EXPECT_EQ(default_generator().offset(), offset_a) << "dropout draws continue where they stopped";
  }
}

TEST(Resume, RefusesAMismatchedRun) {
  Data d;
  TempDir dir;
  Trainer b(1, false);
  train(b, d, 0, 2, true);
  TrainProgress p;
  p.step = 2;
  p.global_batch = kBatch;
  save_training_state(dir.path, b.components(), p);
  Trainer c(2, false);
  EXPECT_THROW(load_training_state(dir.path, c.components(), 2 * kBatch), ValueError);
  TrainComponents no_ema = c.components();
  no_ema.ema = nullptr;
  EXPECT_THROW(load_training_state(dir.path, no_ema), ValueError);
  Trainer f(2, true);
  EXPECT_THROW(load_training_state(dir.path, f.components()), ValueError);  // Adam state into FusedAdamW
}

TEST(Resume, AnotherWorldSizeVisitsTheSameSamples) {
  // Global batch 8 on 1 rank vs 4 + 4 on 2 ranks: stopping after 3 steps of an epoch, rank r of
  // the new world skips sampler_position / world of its shard and the global batches coincide.
  const int64_t G = 8, position = 3 * G;
  parallel::DistributedSampler one(kData, 1, 0, {true, 5, false});
  parallel::DistributedSampler r0(kData, 2, 0, {true, 5, false}), r1(kData, 2, 1, {true, 5, false});
  auto all = one.indices(1), s0 = r0.indices(1), s1 = r1.indices(1);
  for (int64_t b = position / G; b < kData / G; ++b) {
    std::vector<int64_t> want(all.begin() + b * G, all.begin() + (b + 1) * G);
    std::vector<int64_t> got;
    for (int64_t i = 0; i < G / 2; ++i) {
      got.push_back(s0[static_cast<size_t>(b * G / 2 + i)]);
      got.push_back(s1[static_cast<size_t>(b * G / 2 + i)]);
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(want, got) << "global batch " << b;
  }
}
