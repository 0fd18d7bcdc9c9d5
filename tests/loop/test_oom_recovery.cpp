// Out-of-memory recovery of the training loop (train/trainer_step.cpp) on 1..N ranks: a step
// that fails on one rank only (in forward, or inside backward after the other ranks launched their
// bucket all-reduces) or under a memory budget on that rank is redone by every rank with half the
// micro-batch and twice the accumulation, and the run ends with the parameters of a run started
// that way (the same samples; BatchNorm per micro-batch in both). Also on `sim` (emulated CUDA). And
// the ranks agree once per step (per attempt), for every feature that needs it (step_agreement.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "train/factory.h"
#include "nn/model_registry.h"
#include "train/stop_signal.h"
#include "train/train_features.h"
#include "nn/layers/sequential.h"
#include "runtime/autograd.h"
#include "runtime/memory_budget.h"
#include "tests/parallel/parallel_util.h"
#include "tests/support/scoped_memory_limit.h"
#include "tests/support/synthetic_images.h"

using namespace tandem;
using namespace tandem::train;

namespace {

// Where FailOnce throws: on `rank`, at its `call`-th forward (counted from 1), in forward or in the
// backward of that forward.
struct FailPlan {
  int rank = -1;
  int64_t call = 0;  // -1: every forward
  bool in_backward = false;
  int64_t calls = 0;
  int64_t fired = 0;
};

// Identity that throws OutOfMemoryError where the plan says, as a full allocator would.
class FailOnce final : public nn::Module {
 public:
  FailOnce(std::shared_ptr<FailPlan> plan, int rank) : plan_(std::move(plan)), rank_(rank) {}
  Tensor forward(const Tensor& x) override {
    const bool fire = is_training() && rank_ == plan_->rank && (++plan_->calls == plan_->call || plan_->call < 0);
    if (!fire) return x;
    ++plan_->fired;
    if (!plan_->in_backward) throw_out_of_memory(__FILE__, __LINE__, "injected: out of memory in forward");
    return record("fail_once", {x}, x.clone(), [](const std::vector<Tensor>&) -> std::vector<Tensor> {
      throw_out_of_memory(__FILE__, __LINE__, "injected: out of memory in backward");
    });
  }
  std::string type_name() const override { return "FailOnce"; }
  std::shared_ptr<Module> clone() const override { return std::make_shared<FailOnce>(plan_, rank_); }

 private:
  std::shared_ptr<FailPlan> plan_;
  int rank_;
};

struct RunResult {
  std::string hash;
  int64_t micro = 0, accumulation = 0, recoveries = 0, steps = 0;
  std::vector<float> parameters;  // all of them, in order
};

// Passes every call through to `inner`, counting the f64 all-reduces by element count: the step
// agreement's (every other collective of a cnn step is f32, but the epoch's 2-element totals).
class CountingComm final : public tandem::testing::ForwardingComm {
 public:
  using ForwardingComm::ForwardingComm;
  comm::WorkPtr allreduce(void* buf, int64_t count, DType dtype, comm::ReduceOp op) override {
    if (dtype == DType::f64) ++f64_allreduces[count];
    return inner_->allreduce(buf, count, dtype, op);
  }
  std::map<int64_t, int> f64_allreduces;
};

// `model_name` (the cnn unless told) with FailOnce after its first layer (so a failure in backward
// comes after the later layers' buckets were launched), trained for `steps` steps on the synthetic
// images. With `counting`, the run goes through it and trains with the SIGTERM stop as tandem-train
// --save does: all three features with a share in the step agreement.
RunResult run_training(int64_t batch, int64_t accumulation, std::shared_ptr<FailPlan> plan,
                nn::parallel::DDPOptions ddp = {}, Device device = kCPU, int64_t steps = 3,
                std::shared_ptr<CountingComm> counting = nullptr, const std::string& model_name = "cnn") {
  std::shared_ptr<comm::Communicator> comm = tandem::testing::world();
  if (counting) comm = counting;
  TrainConfig cfg;
  cfg.model = nn::default_model_config(model_name);
  cfg.batch_size = batch;
  cfg.accumulation_steps = accumulation;
  cfg.max_steps = steps;
  cfg.epochs = 1;
  cfg.eval = false;
  cfg.quiet = true;
  cfg.mode = comm->size() > 1 ? ParallelMode::DDP : ParallelMode::Single;
  // A budget in the config turns on the per-step agreement of the ranks (on the CPU); the tests set
  // the real budgets (or inject failures) per rank themselves.
  cfg.memory_limit = "1TB";
  auto layers = std::dynamic_pointer_cast<nn::Sequential>(make_model(cfg));
  auto model = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i < layers->children().size(); ++i) {
    model->push_back(layers->children()[i].second);
    if (i == 0) model->push_back(std::make_shared<FailOnce>(plan, comm->rank()));
  }
  model->to(device);
  ParallelConfig pc;
  pc.mode = cfg.mode;
  pc.accumulation_steps = accumulation;
  pc.device = device;
  ddp.bucket_cap_mb = ddp.first_bucket_mb = 0.01;  // several buckets: some launched before the failure
  pc.ddp = ddp;
  ParallelSetup ps = setup_parallel(pc, model, comm->size() > 1 ? comm : nullptr);
  auto optimizer = make_optimizer(cfg, ps.model->parameters());
  // Every rank draws its shard of the same 512 images.
  FullTrainer trainer(cfg, ps, std::move(optimizer), tandem::testing::synthetic_images(512, 7),
                      tandem::testing::synthetic_images(64, 8));
  if (counting) trainer.add_callback(std::make_shared<StopOnSignal>(trainer));
  TrainResult r = trainer.fit();
  std::vector<float> parameters;
  for (const Tensor& p : model->parameters()) {
    const std::vector<float> values = p.to_vector<float>();
    parameters.insert(parameters.end(), values.begin(), values.end());
  }
  return {trainer.param_hash(), trainer.micro_batch_size(), trainer.effective_accumulation_steps(),
          trainer.oom_recoveries(), r.steps, parameters};
}

std::shared_ptr<FailPlan> no_failure() { return std::make_shared<FailPlan>(); }

std::shared_ptr<FailPlan> fail_on_last_rank(int64_t call, bool in_backward) {
  auto p = std::make_shared<FailPlan>();
  p->rank = tandem::testing::world()->size() - 1;
  p->call = call;
  p->in_backward = in_backward;
  return p;
}

void expect_recovered(const RunResult& got, const RunResult& want) {
  EXPECT_EQ(got.hash, want.hash);
  EXPECT_EQ(got.micro, want.micro);
  EXPECT_EQ(got.accumulation, want.accumulation);
  EXPECT_EQ(got.recoveries, 1);
  EXPECT_EQ(got.steps, want.steps);
}

}  // namespace

TEST(OomRecovery, FailureInsideBackwardOnOneRankIsRedoneWithHalfTheMicroBatch) {
  const RunResult want = run_training(16, 2, no_failure());
  auto plan = fail_on_last_rank(1, /*in_backward=*/true);
  expect_recovered(run_training(32, 1, plan), want);
  EXPECT_EQ(plan->fired, tandem::testing::world()->rank() == plan->rank ? 1 : 0);
}

TEST(OomRecovery, FailureInForwardOnOneRank) {
  const RunResult want = run_training(16, 2, no_failure());
  expect_recovered(run_training(32, 1, fail_on_last_rank(1, false)), want);
}

// A batch cut into unequal pieces (5 into 3 and 2) still gives the whole batch's gradient: each
// piece weighs its share of the samples (3/5, 2/5), not 1/2. The mlp has no BatchNorm, so the cut
// run equals the uncut one to rounding (not bitwise: the sums are ordered otherwise).
TEST(OomRecovery, UnequalPiecesWeighTheirSamples) {
  const RunResult whole = run_training(5, 1, no_failure(), {}, kCPU, 3, nullptr, "mlp");
  const RunResult cut = run_training(5, 1, fail_on_last_rank(1, false), {}, kCPU, 3, nullptr, "mlp");
  EXPECT_EQ(cut.micro, 3);
  EXPECT_EQ(cut.accumulation, 2);
  EXPECT_EQ(cut.recoveries, 1);
  ASSERT_EQ(cut.parameters.size(), whole.parameters.size());
  double worst = 0;
  for (size_t i = 0; i < whole.parameters.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(cut.parameters[i]) - whole.parameters[i]) /
                                std::max(1.0, std::fabs(static_cast<double>(whole.parameters[i]))));
  EXPECT_LT(worst, 1e-5) << "the cut steps' gradient is not the whole batch's";
}

TEST(OomRecovery, FailureInTheSecondStepsLastMicroBatchWithAccumulation) {
  // Step 1 runs at micro-batch 16 x 2; step 2 fails in the forward of its second micro-batch (the
  // synchronised one); from there 8 x 4. The reference: the same first step, then 8 x 4.
  const RunResult plain = run_training(16, 2, no_failure());
  const RunResult got = run_training(16, 2, fail_on_last_rank(4, false));
  EXPECT_NE(got.hash, plain.hash);  // step 1 at 16 x 2, steps 2 and 3 at 8 x 4: not the plain run
  EXPECT_EQ(got.micro, 8);
  EXPECT_EQ(got.accumulation, 4);
  EXPECT_EQ(got.recoveries, 1);
}

TEST(OomRecovery, FailureInsideBackwardWithBucketViewsAndUnusedParameterSearch) {
  nn::parallel::DDPOptions o;
  o.gradient_as_bucket_view = true;
  o.find_unused_parameters = true;
  const RunResult want = run_training(16, 2, no_failure(), o);
  expect_recovered(run_training(32, 1, fail_on_last_rank(1, true), o), want);
}

// The bytes of the cnn's parameters: SGD's momentum buffers, made by the first optimizer step.
size_t cnn_param_bytes() {
  TrainConfig cfg;
  cfg.model = nn::default_model_config("cnn");
  size_t n = 0;
  for (const Tensor& p : make_model(cfg)->parameters()) n += p.nbytes();
  return n;
}

TEST(OomRecovery, MemoryBudgetOnOneRank) {
  // A budget above the whole run at micro-batch 16 but below the first step at 32 (whose peak in
  // backward is the run's peak less the momentum buffers that step 2 adds), measured on this rank.
  auto comm = tandem::testing::world();
  memory::reset_peak(kCPU);
  const size_t base = memory::in_use(kCPU);
  const RunResult want = run_training(16, 2, no_failure());
  const size_t peak16 = memory::peak(kCPU);
  memory::reset_peak(kCPU);
  run_training(32, 1, no_failure());
  const size_t peak32 = memory::peak(kCPU);
  const size_t first_step32 = peak32 - cnn_param_bytes();
  ASSERT_GT(first_step32, peak16);
  ASSERT_EQ(memory::in_use(kCPU), base);
  RunResult got;
  {  // the budget on the last rank only (0: none)
    tandem::testing::ScopedMemoryLimit limit(DeviceKind::CPU,
                                             comm->rank() == comm->size() - 1 ? (peak16 + first_step32) / 2 : 0);
    got = run_training(32, 1, no_failure());
  }
  expect_recovered(got, want);
}

TEST(OomRecovery, MicroBatchOneIsAClearError) {
  // The last rank fails every forward: 4 -> 2 -> 1 -> the error, on every rank (agreed).
  try {
    run_training(4, 1, fail_on_last_rank(-1, false));
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("at micro-batch size 1"), std::string::npos) << e.what();
  }
}

TEST(OomRecovery, OnTheEmulatedCudaDevice) {
  if (tandem::testing::world()->size() > 1) GTEST_SKIP() << "one rank: the sim device is not a DDP device";
  // As MemoryBudgetOnOneRank, for 2 steps (the emulator is slow on convolutions).
  const Device sim = Device::parse("sim:0");
  memory::reset_peak(sim);
  const RunResult want = run_training(16, 2, no_failure(), {}, sim, 2);
  const size_t peak16 = memory::peak(sim);
  memory::reset_peak(sim);
  run_training(32, 1, no_failure(), {}, sim, 2);
  const size_t first_step32 = memory::peak(sim) - cnn_param_bytes();
  ASSERT_GT(first_step32, peak16);
  RunResult got;
  {
    tandem::testing::ScopedMemoryLimit limit(DeviceKind::SIM, (peak16 + first_step32) / 2);
    got = run_training(32, 1, no_failure(), {}, sim, 2);
  }
  expect_recovered(got, want);
}

TEST(OomRecovery, OneAgreementPerStepAndPerRetriedAttempt) {
  // The OOM flag, every rank's loss (non-finite guard) and the SIGTERM flag in one all-reduce of
  // 1 + ranks + 1 values per step; a failed attempt adds one (its retry agrees again). One rank: none.
  auto world = tandem::testing::world();
  const int n = world->size();
  auto plain = std::make_shared<CountingComm>(world);
  run_training(32, 1, no_failure(), {}, kCPU, 3, plain);
  auto failing = std::make_shared<CountingComm>(world);
  const RunResult got = run_training(32, 1, fail_on_last_rank(1, false), {}, kCPU, 3, failing);
  EXPECT_EQ(got.recoveries, 1);
  if (n == 1) {
    EXPECT_TRUE(plain->f64_allreduces.empty());
    EXPECT_TRUE(failing->f64_allreduces.empty());
    return;
  }
  // The step agreements, and the epoch's loss totals (2 values) once.
  const std::map<int64_t, int> want_plain{{2, 1}, {n + 2, 3}}, want_failing{{2, 1}, {n + 2, 4}};
  EXPECT_EQ(plain->f64_allreduces, want_plain);
  EXPECT_EQ(failing->f64_allreduces, want_failing);
}
