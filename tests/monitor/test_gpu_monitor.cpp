// The GPU monitor: CUDA_VISIBLE_DEVICES as CUDA reads it; the figures read through a fake NVML
// (ctest monitor_fake_nvml), a GPU that vanishes, NVML missing or failing to initialise (ctest
// monitor_nvml_missing, monitor_nvml_init_fails); against the CUDA runtime where a GPU is there.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "runtime/device_query.h"
#include "runtime/memory_budget.h"
#include "runtime/monitor/device_selection.h"
#include "runtime/monitor/gpu_monitor.h"
#include "runtime/monitor/sampler.h"

using namespace tandem;
using monitor::GpuStats;

namespace {

constexpr unsigned long long GiB = 1024ull * 1024ull * 1024ull;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
bool using_fake() { return env("TANDEM_NVML_LIBRARY") == FAKE_NVML_PATH; }

#define REQUIRE_FAKE()                                                                                 \
  if (!using_fake() || !env("FAKE_NVML_INIT_FAIL").empty())                                            \
  GTEST_SKIP() << "runs as ctest monitor_fake_nvml (TANDEM_NVML_LIBRARY=" FAKE_NVML_PATH ")"

// The fake's test controls, from the copy the monitor opened.
template <typename Fn>
Fn fake_control(const char* name) {
  void* h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "the monitor has not opened the fake NVML";
  Fn fn = h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
  if (h) dlclose(h);
  return fn;
}

struct VisibleEnv {  // sets CUDA_VISIBLE_DEVICES for one test (nullptr: unset), restores it after
  explicit VisibleEnv(const char* value) {
    if (const char* old = std::getenv("CUDA_VISIBLE_DEVICES")) old_ = old, had_ = true;
    value ? setenv("CUDA_VISIBLE_DEVICES", value, 1) : unsetenv("CUDA_VISIBLE_DEVICES");
  }
  ~VisibleEnv() { had_ ? setenv("CUDA_VISIBLE_DEVICES", old_.c_str(), 1) : unsetenv("CUDA_VISIBLE_DEVICES"); }
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST(MapVisibleDevices, AsCudaReadsTheVariable) {
  const std::vector<std::string> uuids = {"GPU-11111111-aaaa", "GPU-22222222-bbbb", "GPU-11112222-cccc", ""};
  struct Case {
    const char* visible;
    std::vector<int> expected;
  };
  const Case cases[] = {
      {nullptr, {0, 1, 2, 3}},          // unset: every GPU in NVML's order
      {"", {}},                          // empty: none
      {"2,0", {2, 0}},                   // CUDA's order is the list's
      {" 1 , 0 ", {1, 0}},               // spaces around entries
      {"0,2,-1,1", {0, 2}},              // an invalid entry ends the list
      {"1,7,0", {1}},                    // so does an index past the last GPU
      {"1,1", {}},                       // a repeated device hides them all
      {"1gpu", {1}},                     // leading digits, as strtoul reads them
      {"abc", {}},
      {"GPU-22222222", {1}},             // a unique UUID prefix
      {"gpu-22222222-BBBB", {1}},        // case does not matter
      {"GPU-1111", {}},                  // an ambiguous prefix names no GPU
      {"GPU-11112222-cccc,0", {2, 0}},   // UUIDs and indices mixed
      {"GPU-99", {}},                    // no such GPU
      {"MIG-GPU-11111111-aaaa/1/0", {}}, // MIG instances are not mapped
  };
  for (const Case& c : cases)
    EXPECT_EQ(monitor::map_visible_devices(c.visible, uuids), c.expected) << (c.visible ? c.visible : "(unset)");
}

TEST(FakeNvml, ReadsEveryFigure) {
  REQUIRE_FAKE();
  VisibleEnv visible(nullptr);
  const std::vector<GpuStats> gpus = monitor::query_gpus();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(monitor::gpu_unavailable_reason(), "");
  const GpuStats& g = gpus[1];
  EXPECT_EQ(g.index, 1);
  EXPECT_EQ(g.nvml_index, 1);
  EXPECT_EQ(g.name, "Fake GPU H100");
  EXPECT_EQ(g.uuid, "GPU-22222222-aaaa-bbbb-cccc-000000000001");
  EXPECT_EQ(g.cc_major, 9);
  EXPECT_EQ(g.cc_minor, 0);
  EXPECT_EQ(g.memory_total, 80 * GiB);
  EXPECT_EQ(g.memory_free, 70 * GiB);
  EXPECT_EQ(g.memory_used, 10 * GiB);
  EXPECT_EQ(g.util_gpu, 15u);
  EXPECT_EQ(g.util_memory, 4u);
  EXPECT_EQ(g.temperature_c, 41u);
  ASSERT_TRUE(g.power_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_w, 124.456);  // milliwatts to watts
  EXPECT_EQ(g.power_limit_w, 700.0);
  EXPECT_EQ(g.sm_clock_mhz, 1880u);
  EXPECT_EQ(g.ecc_uncorrected_volatile, 2u);
  EXPECT_FALSE(g.lost);
  EXPECT_EQ(g.unavailable, "");
  EXPECT_EQ(gpus[0].cc_major, 8);
  // GPU 2 has no ECC: that figure alone is unavailable, with the call, where, and NVML's words.
  const GpuStats& c = gpus[2];
  EXPECT_EQ(c.name, "Fake \"GPU\" \\ C");
  EXPECT_FALSE(c.ecc_uncorrected_volatile.has_value());
  EXPECT_TRUE(c.memory_free.has_value());
  EXPECT_NE(c.unavailable.find("ecc: runtime/monitor/gpu_monitor.cpp:"), std::string::npos) << c.unavailable;
  EXPECT_NE(c.unavailable.find("nvmlDeviceGetTotalEccErrors failed: Not Supported"), std::string::npos) << c.unavailable;
  EXPECT_NE(c.unavailable.find("failed: Not Supported"), std::string::npos) << c.unavailable;
}

TEST(FakeNvml, CudaVisibleDevicesRenumbers) {
  REQUIRE_FAKE();
  {
    VisibleEnv visible("2,GPU-22222222");
    const std::vector<GpuStats> gpus = monitor::query_gpus();
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].index, 0);
    EXPECT_EQ(gpus[0].nvml_index, 2);
    EXPECT_EQ(gpus[0].memory_total, 40 * GiB);
    EXPECT_EQ(gpus[1].index, 1);
    EXPECT_EQ(gpus[1].nvml_index, 1);
    EXPECT_EQ(gpus[1].name, "Fake GPU H100");
  }
  {
    VisibleEnv visible("");
    EXPECT_TRUE(monitor::query_gpus().empty());
    EXPECT_NE(monitor::gpu_unavailable_reason().find("CUDA_VISIBLE_DEVICES=\"\""), std::string::npos)
        << monitor::gpu_unavailable_reason();
  }
}

TEST(FakeNvml, VanishingGpuBecomesUnavailable) {
  REQUIRE_FAKE();
  VisibleEnv visible(nullptr);
  ASSERT_EQ(monitor::query_gpus().size(), 3u);  // opens the fake
  auto set_lost = fake_control<void (*)(int, int)>("fake_nvml_set_lost");
  ASSERT_NE(set_lost, nullptr);
  monitor::Sampler sampler({std::chrono::milliseconds(5)});
  sampler.start();
  set_lost(1, 1);  // GPU 1 falls off the bus while the sampler runs
  std::vector<GpuStats> gpus;
  EXPECT_NO_THROW(gpus = monitor::query_gpus());
  ASSERT_EQ(gpus.size(), 3u);
  const GpuStats& g = gpus[1];
  EXPECT_TRUE(g.lost);
  EXPECT_EQ(g.nvml_index, 1);
  EXPECT_FALSE(g.memory_free || g.util_gpu || g.temperature_c || g.power_w || g.sm_clock_mhz ||
               g.ecc_uncorrected_volatile);
  EXPECT_EQ(g.name, "");
  EXPECT_NE(g.unavailable.find("GPU is lost"), std::string::npos) << g.unavailable;
  EXPECT_TRUE(gpus[0].memory_free.has_value());  // the others are unaffected
  // The sampler keeps publishing, the lost GPU marked, and nothing throws.
  const uint64_t seen = sampler.latest() ? sampler.latest()->sequence : 0;
  for (int i = 0; i < 400 && (!sampler.latest() || sampler.latest()->sequence < seen + 2); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto snap = sampler.latest();
  ASSERT_NE(snap, nullptr);
  ASSERT_EQ(snap->gpus.size(), 3u);
  EXPECT_TRUE(snap->gpus[1].lost);
  sampler.stop();
  // Selected by UUID, the lost GPU (whose UUID NVML no longer gives) ends CUDA's list.
  {
    VisibleEnv by_uuid("GPU-22222222");
    EXPECT_TRUE(monitor::query_gpus().empty());
  }
  set_lost(1, 0);  // back (a driver reload)
  gpus = monitor::query_gpus();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_FALSE(gpus[1].lost);
  EXPECT_EQ(gpus[1].memory_free, 70 * GiB);
}

// --device auto's choice on the figures NVML gives (the fake's: 10, 70 and 30 GiB free).
TEST(FakeNvml, DeviceChoiceFollowsFreeMemory) {
  REQUIRE_FAKE();
  auto set_free = [] {
    VisibleEnv visible(nullptr);
    monitor::query_gpus();  // opens the fake
    return fake_control<void (*)(int, unsigned long long)>("fake_nvml_set_free");
  }();
  ASSERT_NE(set_free, nullptr);
  {
    VisibleEnv visible(nullptr);
    auto gpus = monitor::query_gpus();
    EXPECT_EQ(monitor::choose_device(gpus, 0, 1, 0).device, Device(DeviceKind::CUDA, 1));
    EXPECT_EQ(monitor::choose_device(gpus, 1, 2, 0).device, Device(DeviceKind::CUDA, 2));
    const monitor::DeviceChoice c = monitor::choose_device(gpus, 0, 1, memory::parse_size("75GiB"));
    EXPECT_TRUE(c.device.is_cpu());
    EXPECT_NE(c.reason.find("0 of 3 GPUs with >= 75.0 GiB free"), std::string::npos) << c.reason;
    set_free(0, 75 * GiB);  // memory freed on GPU 0: it now has the most
    EXPECT_EQ(monitor::choose_device(monitor::query_gpus(), 0, 1, 0).device, Device(DeviceKind::CUDA, 0));
    set_free(0, 10 * GiB);
  }
  {
    VisibleEnv visible("0,2");  // CUDA's cuda:1 is NVML's GPU 2 (30 GiB free), the most of the two
    const monitor::DeviceChoice c = monitor::choose_device(monitor::query_gpus(), 0, 1, 0);
    EXPECT_EQ(c.device, Device(DeviceKind::CUDA, 1));
    EXPECT_NE(c.reason.find("cuda:1 (Fake \"GPU\" \\ C): 30.0 GiB free of 40.0 GiB"), std::string::npos) << c.reason;
  }
}

TEST(NvmlMissing, QueryIsEmptyWithTheReason) {
  if (env("TANDEM_NVML_LIBRARY").find("nonexistent") == std::string::npos)
    GTEST_SKIP() << "runs as ctest monitor_nvml_missing (TANDEM_NVML_LIBRARY=/nonexistent/...)";
  std::vector<GpuStats> gpus;
  EXPECT_NO_THROW(gpus = monitor::query_gpus());
  EXPECT_TRUE(gpus.empty());
  const std::string why = monitor::gpu_unavailable_reason();
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1 not found"), std::string::npos) << why;
  monitor::Snapshot s = monitor::sample_now();
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_EQ(s.gpu_unavailable, why);
}

TEST(NvmlInitFails, QueryIsEmptyWithNvmlsWords) {
  if (env("FAKE_NVML_INIT_FAIL").empty()) GTEST_SKIP() << "runs as ctest monitor_nvml_init_fails";
  EXPECT_TRUE(monitor::query_gpus().empty());
  EXPECT_EQ(monitor::gpu_unavailable_reason(), "nvmlInit_v2 failed: Driver Not Loaded");
}

// The real libnvidia-ml where there is one (a GPU machine), else its absence said in words.
TEST(RealNvml, AgreesWithTheCudaRuntime) {
  if (!env("TANDEM_NVML_LIBRARY").empty()) GTEST_SKIP() << "TANDEM_NVML_LIBRARY is set";
  const std::vector<GpuStats> gpus = monitor::query_gpus();
  if (gpus.empty()) {
    EXPECT_NE(monitor::gpu_unavailable_reason(), "");
    EXPECT_EQ(cuda::device_count(), 0) << "CUDA sees GPUs that NVML does not: " << monitor::gpu_unavailable_reason();
    return;
  }
  EXPECT_EQ(static_cast<int>(gpus.size()), cuda::device_count());
  for (const GpuStats& g : gpus) {
    SCOPED_TRACE(g.name);
    EXPECT_FALSE(g.lost) << g.unavailable;
    EXPECT_FALSE(g.uuid.empty());
    ASSERT_TRUE(g.memory_total && g.memory_free && g.util_gpu && g.temperature_c && g.sm_clock_mhz);
    if (g.index >= cuda::device_count()) continue;
    const cuda::DeviceInfo info = cuda::device_info(g.index);
    EXPECT_EQ(info.name, g.name);
    EXPECT_EQ(g.cc_major, info.cc_major);
    EXPECT_EQ(g.cc_minor, info.cc_minor);
    // NVML counts memory the driver reserves that CUDA does not offer: the totals agree within 5%.
    EXPECT_NEAR(static_cast<double>(*g.memory_total), static_cast<double>(info.memory_total),
                0.05 * static_cast<double>(info.memory_total));
  }
}
