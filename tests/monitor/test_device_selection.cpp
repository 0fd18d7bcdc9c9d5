// --device auto's choice: table-driven cases of free memory, ranks per node and the minimum, and
// the --min-free-memory size parser.
#include <gtest/gtest.h>

#include "runtime/error.h"
#include "runtime/memory_budget.h"
#include "runtime/monitor/device_selection.h"

using namespace tandem;
using monitor::GpuStats;

namespace {
constexpr uint64_t GiB = 1ull << 30;

GpuStats gpu(int index, std::optional<uint64_t> free_gib, uint64_t total_gib = 80) {
  GpuStats g;
  g.index = index;
  g.nvml_index = index;
  g.name = "GPU" + std::to_string(index);
  g.memory_total = total_gib * GiB;
  if (free_gib) g.memory_free = *free_gib * GiB;
  return g;
}
}  // namespace

TEST(ChooseDevice, Table) {
  struct Case {
    const char* what;
    std::vector<GpuStats> gpus;
    int local_rank, local_size;
    uint64_t min_free;
    Device expected;
    const char* reason_has;
  };
  const Device cpu = kCPU;
  auto cuda = [](int i) { return Device(DeviceKind::CUDA, i); };
  const std::vector<GpuStats> three = {gpu(0, 10), gpu(1, 70), gpu(2, 30)};
  const Case cases[] = {
      {"no GPU", {}, 0, 1, 0, cpu, "cpu: no GPU visible"},
      {"one rank takes the most free", three, 0, 1, 0, cuda(1), "cuda:1 (GPU1): 70.0 GiB free of 80.0 GiB"},
      {"ranks in order of free memory (0)", three, 0, 3, 0, cuda(1), "rank 0 of 3 on this node by free memory"},
      {"ranks in order of free memory (1)", three, 1, 3, 0, cuda(2), "cuda:2"},
      {"ranks in order of free memory (2)", three, 2, 3, 0, cuda(0), "cuda:0"},
      {"below the minimum is skipped", three, 1, 2, 20 * GiB, cuda(2), "skipped: cuda:0 10.0 GiB free"},
      {"too few above the minimum: cpu", three, 0, 3, 20 * GiB, cpu,
       "cpu: 3 ranks on this node but 2 of 3 GPUs with >= 20.0 GiB free"},
      {"nothing above the minimum", three, 0, 1, 100 * GiB, cpu, "0 of 3 GPUs with >= 100.0 GiB free"},
      {"more ranks than GPUs", three, 3, 4, 0, cpu, "4 ranks on this node but 3 of 3 GPUs"},
      {"ties go to the lower index", {gpu(0, 5), gpu(1, 5)}, 1, 2, 0, cuda(1), "cuda:1"},
      {"unavailable memory is not eligible", {gpu(0, std::nullopt), gpu(1, 1)}, 0, 1, 0, cuda(1),
       "skipped: cuda:0 free memory unavailable"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const monitor::DeviceChoice d = monitor::choose_device(c.gpus, c.local_rank, c.local_size, c.min_free);
    EXPECT_EQ(d.device, c.expected) << d.device.str();
    EXPECT_NE(d.reason.find(c.reason_has), std::string::npos) << d.reason;
    EXPECT_EQ(d.reason.find('\n'), std::string::npos);
  }
}

TEST(ChooseDevice, LostGpuIsSkipped) {
  GpuStats lost = gpu(0, std::nullopt);
  lost.lost = true;
  const monitor::DeviceChoice d = monitor::choose_device({lost, gpu(1, 2)}, 0, 1, 0);
  EXPECT_EQ(d.device, Device(DeviceKind::CUDA, 1));
  EXPECT_NE(d.reason.find("cuda:0 lost"), std::string::npos) << d.reason;
}

TEST(ChooseDevice, RejectsABadRank) {
  EXPECT_THROW(monitor::choose_device({}, 2, 2, 0), ValueError);
  EXPECT_THROW(monitor::choose_device({}, 0, 0, 0), ValueError);
}

TEST(ParseSize, UnitsAndErrors) {
  EXPECT_EQ(memory::parse_size("0"), 0u);
  EXPECT_EQ(memory::parse_size("512"), 512u);
  EXPECT_EQ(memory::parse_size("512MB"), 512000000u);
  EXPECT_EQ(memory::parse_size("2GB"), 2000000000u);
  EXPECT_EQ(memory::parse_size("1.5 GiB"), 1610612736u);
  EXPECT_EQ(memory::parse_size("100mib"), 104857600u);
  EXPECT_EQ(memory::parse_size("4k"), 4000u);
  EXPECT_THROW(memory::parse_size(""), ValueError);
  EXPECT_THROW(memory::parse_size("GB"), ValueError);
  EXPECT_THROW(memory::parse_size("-1GB"), ValueError);
  EXPECT_THROW(memory::parse_size("3 parsecs"), ValueError);
  EXPECT_THROW(memory::parse_size("1e30TB"), ValueError);
}
