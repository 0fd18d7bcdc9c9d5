// DataParallel on 2-4 cpu devices of one process: training equals single-device training, the
// replicas stay identical to the module, and a batch smaller than the device count still works.
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/train_integration.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DataParallel;

std::vector<Device> cpu_devices(int n) {
  std::vector<Device> d;
  for (int k = 0; k < n; ++k) d.push_back(Device(DeviceKind::CPU, k));
  return d;
}

void check_dp_matches_single(int devices, int64_t batch, bool adam) {
  auto ref = small_mlp(31);
  auto model = small_mlp(31);
  DataParallel dp(model, cpu_devices(devices));
  std::unique_ptr<nn::Optimizer> opt, opt_ref;
  if (adam) {
    nn::AdamOptions o;
    o.lr = 1e-2;
    opt = std::make_unique<nn::Adam>(dp.parameters(), o);
    opt_ref = std::make_unique<nn::Adam>(ref->parameters(), o);
  } else {
    nn::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    opt = std::make_unique<nn::SGD>(dp.parameters(), o);
    opt_ref = std::make_unique<nn::SGD>(ref->parameters(), o);
  }
  for (int step = 0; step < 4; ++step) {
    Batch b = make_batch(200 + static_cast<uint64_t>(step), {batch, 12}, 5);
    opt_ref->zero_grad();
    Tensor loss_ref = ops::cross_entropy(ref->forward(b.x), b.y);
    loss_ref.backward();
    opt_ref->step();

    opt->zero_grad();
    Tensor out = dp.forward(b.x);
    ASSERT_EQ(out.shape(), (Shape{batch, 5}));
    Tensor loss = ops::cross_entropy(out, b.y);
    EXPECT_NEAR(loss.item(), loss_ref.item(), 1e-5 * std::abs(loss_ref.item()) + 1e-6) << "step " << step;
    loss.backward();
    opt->step();
  }
  expect_same_parameters(*model, *ref, 1e-5, "DataParallel(" + std::to_string(devices) + ")");
  // The next forward brings every replica to the module's weights, on its own device.
  {
    NoGradGuard no_grad;
    dp.forward(make_batch(1, {batch, 12}, 5).x);
  }
  for (size_t k = 1; k < dp.num_replicas(); ++k) {
    expect_same_parameters(*dp.replica(k), *model, 0.0, "replica " + std::to_string(k));
    for (auto& [n, p] : dp.replica(k)->named_parameters()) EXPECT_EQ(p.device(), Device(DeviceKind::CPU, static_cast<int>(k)));
  }
}

TEST(DataParallel, TwoDevicesSgd) { check_dp_matches_single(2, 16, false); }
TEST(DataParallel, ThreeDevicesUnevenSplitAdam) { check_dp_matches_single(3, 10, true); }
TEST(DataParallel, FourDevicesSgd) { check_dp_matches_single(4, 18, false); }
TEST(DataParallel, FewerRowsThanDevices) { check_dp_matches_single(4, 2, true); }

TEST(DataParallel, SplitSizesFollowChunk) {
  auto r = DataParallel::split_sizes(10, 4);  // torch.chunk(10 rows, 4) -> 3, 3, 3, 1
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{0}, int64_t{3}));
  EXPECT_EQ(r[3], std::make_pair(int64_t{9}, int64_t{1}));
  auto s = DataParallel::split_sizes(2, 3);
  EXPECT_EQ(s[2].second, 0);
}

TEST(DataParallel, EvalWithoutGradient) {
  auto model = small_mlp(2);
  DataParallel dp(model, cpu_devices(2));
  dp.eval();
  NoGradGuard no_grad;
  Batch b = make_batch(9, {6, 12}, 5);
  Tensor out = dp.forward(b.x);
  EXPECT_FALSE(out.requires_grad());
  expect_close(out, model->forward(b.x), 1e-6, "eval output");
}

TEST(DataParallel, ChecksDevices) {
  EXPECT_THROW(DataParallel(small_mlp(1), {Device(DeviceKind::CPU, 0), Device(DeviceKind::CPU, 0)}), ValueError);
  auto moved = small_mlp(1);
  moved->to(Device(DeviceKind::CPU, 1));
  EXPECT_THROW(DataParallel(moved, cpu_devices(2)), ValueError);
  auto d = nn::parallel::parse_devices("cpu:0,cpu:1,cpu:2");
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2], Device(DeviceKind::CPU, 2));
}

TEST(TrainIntegration, SingleAndDpModes) {
  nn::parallel::ParallelConfig pc;
  auto model = small_mlp(1);
  auto single = nn::parallel::setup_parallel(pc, model);
  EXPECT_EQ(single.model.get(), model.get());
  EXPECT_FALSE(single.accumulation_scope(0).has_value());
  pc.mode = "dp";
  pc.devices = "cpu:0,cpu:1,cpu:2";
  auto dp = nn::parallel::setup_parallel(pc, small_mlp(1));
  EXPECT_EQ(dp.model->type_name(), "DataParallel");
  EXPECT_EQ(dp.world_size(), 1);
  pc.mode = "fsdp";
  EXPECT_THROW(nn::parallel::setup_parallel(pc, small_mlp(1)), ValueError);
  pc.mode = "dp";
  pc.sync_bn = true;
  EXPECT_THROW(nn::parallel::setup_parallel(pc, small_mlp(1)), ValueError);
  pc.sync_bn = false;
  pc.accumulation_steps = 0;
  EXPECT_THROW(nn::parallel::setup_parallel(pc, small_mlp(1)), ValueError);
}

}  // namespace
}  // namespace tandem::testing
