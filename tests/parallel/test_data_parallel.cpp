// DataParallel on 2-4 cpu devices of one process: training equals single-device training, the
// replicas stay identical to the module, and a batch smaller than the device count still works.
#include <omp.h>

#include "train/parallel_setup.h"
#include "nn/parallel/device_workers.h"
#include "tests/parallel/dp_check.h"

namespace tandem::testing {
namespace {

using nn::parallel::DataParallel;

std::vector<Device> cpu_devices(int n) {
  std::vector<Device> d;
  for (int k = 0; k < n; ++k) d.push_back(Device(DeviceKind::CPU, k));
  return d;
}

TEST(DataParallel, TwoDevicesSgd) { check_dp_matches_single(cpu_devices(2), 16, false); }
TEST(DataParallel, ThreeDevicesUnevenSplitAdam) { check_dp_matches_single(cpu_devices(3), 10, true); }
TEST(DataParallel, FourDevicesSgd) { check_dp_matches_single(cpu_devices(4), 18, false); }
TEST(DataParallel, FewerRowsThanDevices) { check_dp_matches_single(cpu_devices(4), 2, true); }

// Each device's worker thread runs its kernels with the creator's OpenMP thread count (tandem-train's
// --threads), not OpenMP's default for a new thread.
TEST(DeviceWorkers, TakeTheCreatorsThreadCount) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    nn::parallel::DeviceWorkers workers(2);
    std::vector<int> seen(2, 0);
    workers.run([&](size_t k) { seen[k] = omp_get_max_threads(); });
    EXPECT_EQ(seen, std::vector<int>(2, threads));
  }
  omp_set_num_threads(saved);
}

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

TEST(ParallelSetup, SingleAndDpModes) {
  train::ParallelConfig pc;
  auto model = small_mlp(1);
  auto single = train::setup_parallel(pc, model);
  EXPECT_EQ(single.model.get(), model.get());
  EXPECT_FALSE(single.accumulation_scope(0).has_value());
  pc.mode = train::ParallelMode::DP;
  pc.devices = "cpu:0,cpu:1,cpu:2";
  auto dp = train::setup_parallel(pc, small_mlp(1));
  EXPECT_EQ(dp.model->type_name(), "DataParallel");
  EXPECT_EQ(dp.world_size(), 1);
  pc.mode = static_cast<train::ParallelMode>(42);  // a cast integer: refused
  EXPECT_THROW(train::setup_parallel(pc, small_mlp(1)), ValueError);
  pc.mode = train::ParallelMode::DP;
  pc.sync_bn = true;
  EXPECT_THROW(train::setup_parallel(pc, small_mlp(1)), ValueError);
  pc.sync_bn = false;
  pc.accumulation_steps = 0;
  EXPECT_THROW(train::setup_parallel(pc, small_mlp(1)), ValueError);
}

}  // namespace
}  // namespace tandem::testing
