// DataParallel on cuda devices: one process, a replica per GPU, gradients summed by an in-process
// NCCL clique (comm::make_nccl_local_group). Training over every GPU present equals training on
// cuda:0 alone (one GPU: the group of one; two or more: the split batch, to 1e-5 relative). The
// device checks run everywhere; the rest skips, saying why, without a GPU (or with only one).
#include <thread>

#include "comm/communicator.h"
#include "nn/parallel/data_parallel.h"
#include "runtime/device_query.h"
#include "tests/parallel/dp_check.h"

namespace tandem::testing {
namespace {

using nn::parallel::DataParallel;

std::vector<Device> cuda_devices() {
  std::vector<Device> d;
  for (int k = 0; k < cuda::device_count(); ++k) d.push_back(Device(DeviceKind::CUDA, k));
  return d;
}

#define SKIP_UNLESS_GPUS(n)                                                                            \
  if (cuda::device_count() < (n))                                                                      \
  GTEST_SKIP() << "needs " << (n) << " GPU(s): " << cuda::describe()

// Runs fn and expects an exception of type E whose message contains every one of `parts`.
template <class E, class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

// ---- device checks: raised before anything touches a GPU, so they run without one too ----

TEST(DataParallelCuda, MixedDeviceKindsAreRejected) {
  const Device cpu0(DeviceKind::CPU, 0), cpu1(DeviceKind::CPU, 1), cuda0(DeviceKind::CUDA, 0);
  expect_error<ValueError>([&] { DataParallel(small_mlp(1), {cpu0, cuda0}); }, {"cpu:0", "cuda:0", "different kinds"});
  expect_error<ValueError>([&] { DataParallel(small_mlp(1), {cuda0, cpu1}); }, {"cuda:0", "cpu:1", "different kinds"});
}

TEST(DataParallelCuda, MissingGpuNamesTheDeviceAndTheCount) {
  const int count = cuda::device_count();
  const Device missing(DeviceKind::CUDA, count);  // one past the last GPU (cuda:0 without any)
  std::vector<Device> devices{missing};
  if (count > 0) devices = {Device(DeviceKind::CUDA, 0), missing};
  const std::string sees = "sees " + std::to_string(count) + " CUDA device";
  expect_error<NotSupportedError>([&] { DataParallel(small_mlp(1), devices); }, {missing.str(), sees});
}

// ---- on GPUs ----

// Member r's contribution: element i is r + 1 + (i % 7) / 2.
float contribution(size_t r, size_t i) { return static_cast<float>(r + 1) + 0.5f * static_cast<float>(i % 7); }

TEST(DataParallelCuda, NcclLocalGroupCollectives) {
  SKIP_UNLESS_GPUS(1);
  const auto devices = cuda_devices();
  const size_t n = devices.size();
  constexpr size_t kCount = 1000;
  for (auto algo : {comm::Options::Algo::Ring, comm::Options::Algo::Native}) {
    const char* name = algo == comm::Options::Algo::Ring ? "ring" : "native";
    comm::Options o;
    o.algo = algo;
    o.timeout_s = 60;
    auto group = comm::make_nccl_local_group(devices, o);
    ASSERT_EQ(group.size(), n);
    std::vector<std::vector<float>> summed(n), bcast(n), gathered(n);
    std::vector<std::exception_ptr> errors(n);
    // Member k driven by its own thread, as DataParallel's device workers do. The inputs come
    // straight from host->device copies queued on the compute stream: the collectives must wait for them.
    std::vector<std::thread> threads;
    for (size_t k = 0; k < n; ++k)
      threads.emplace_back([&, k] {
        try {
          comm::Communicator& c = *group[k];
          EXPECT_EQ(c.rank(), static_cast<int>(k));
          EXPECT_EQ(c.size(), static_cast<int>(n));
          EXPECT_EQ(c.device(), devices[k]);
          std::vector<float> mine(kCount);
          for (size_t i = 0; i < kCount; ++i) mine[i] = contribution(k, i);
          const Shape shape{static_cast<int64_t>(kCount)};
          Tensor t = Tensor::from_vector(mine, shape, DType::f32, c.device());
          c.allreduce(t, comm::ReduceOp::Sum)->wait();
          summed[k] = t.to_vector<float>();
          Tensor b = Tensor::from_vector(mine, shape, DType::f32, c.device());
          c.broadcast(b, static_cast<int>(n) - 1)->wait();
          bcast[k] = b.to_vector<float>();
          Tensor all = Tensor::empty({static_cast<int64_t>(n * kCount)}, DType::f32, c.device());
          c.allgather(Tensor::from_vector(mine, shape, DType::f32, c.device()), all)->wait();
          gathered[k] = all.to_vector<float>();
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (size_t k = 0; k < n; ++k)
      for (size_t i = 0; i < kCount; ++i) {
        float sum = 0;
        for (size_t r = 0; r < n; ++r) sum += contribution(r, i);
        ASSERT_FLOAT_EQ(summed[k][i], sum) << name << " allreduce, member " << k;
        ASSERT_FLOAT_EQ(bcast[k][i], contribution(n - 1, i)) << name << " broadcast, member " << k;
        for (size_t r = 0; r < n; ++r)
          ASSERT_FLOAT_EQ(gathered[k][r * kCount + i], contribution(r, i)) << name << " allgather, member " << k;
      }
  }
}

TEST(DataParallelCuda, NcclLocalGroupChecksDevices) {
  SKIP_UNLESS_GPUS(1);
  const Device cuda0(DeviceKind::CUDA, 0);
  expect_error<ValueError>([&] { comm::make_nccl_local_group({cuda0, cuda0}); }, {"cuda:0", "twice"});
  expect_error<ValueError>([&] { comm::make_nccl_local_group({Device(DeviceKind::CPU, 0)}); }, {"cpu:0"});
  const Device missing(DeviceKind::CUDA, cuda::device_count());
  expect_error<NotSupportedError>([&] { comm::make_nccl_local_group({missing}); }, {missing.str()});
}

TEST(DataParallelCuda, OneGpuMatchesSingleDevice) {
  SKIP_UNLESS_GPUS(1);
  check_dp_matches_single({Device(DeviceKind::CUDA, 0)}, 16, false);
}

TEST(DataParallelCuda, AllGpusSgdMatchesSingleDevice) {
  SKIP_UNLESS_GPUS(2);
  check_dp_matches_single(cuda_devices(), 16, false);
}

TEST(DataParallelCuda, AllGpusUnevenSplitAdamMatchesSingleDevice) {
  SKIP_UNLESS_GPUS(2);
  check_dp_matches_single(cuda_devices(), 2 * cuda::device_count() + 1, true);
}

TEST(DataParallelCuda, FewerRowsThanGpus) {
  SKIP_UNLESS_GPUS(2);
  check_dp_matches_single(cuda_devices(), 1, true);
}

TEST(DataParallelCuda, CopiesBetweenGpus) {
  SKIP_UNLESS_GPUS(2);
  const Device a(DeviceKind::CUDA, 0), b(DeviceKind::CUDA, 1);
  Tensor host = make_batch(3, {33, 7}, 2).x;
  Tensor on_b = host.to(a).to(b);
  ASSERT_EQ(on_b.device(), b);
  expect_close(on_b, host, 0.0, "cuda:0 -> cuda:1");
  // Gather-style: rows of a cuda:0 tensor filled from cuda:1.
  Tensor dst = Tensor::zeros({66, 7}, DType::f32, a);
  dst.narrow0(33, 33).copy_(on_b);
  expect_close(dst.narrow0(33, 33), host, 0.0, "cuda:1 -> rows of cuda:0");
  expect_close(dst.narrow0(0, 33), Tensor::zeros({33, 7}), 0.0, "untouched rows");
}

TEST(DataParallelCuda, EvalWithoutGradient) {
  SKIP_UNLESS_GPUS(1);
  const Device first(DeviceKind::CUDA, 0);
  auto model = small_mlp(2);
  model->to(first);
  DataParallel dp(model, cuda_devices());
  dp.eval();
  NoGradGuard no_grad;
  Batch b = make_batch(9, {6, 12}, 5);
  Tensor out = dp.forward(b.x.to(first));
  EXPECT_FALSE(out.requires_grad());
  expect_close(out, model->forward(b.x.to(first)), 1e-6, "eval output");
}

}  // namespace
}  // namespace tandem::testing
