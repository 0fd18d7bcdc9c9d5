// Host figures against /proc read independently here, and the sampler thread's life cycle.
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/error.h"
#include "runtime/monitor/host_monitor.h"
#include "runtime/monitor/sampler.h"

using namespace tandem;

TEST(HostMonitor, AgreesWithProcAndGetrusage) {
  std::vector<char> ballast(64 << 20, 1);  // 64 MiB resident, so RSS is clearly above it
  for (size_t i = 0; i < ballast.size(); i += 4096) ballast[i] = static_cast<char>(i);
  const monitor::HostStats h = monitor::query_host();
  EXPECT_EQ(h.logical_cores, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_FALSE(h.hostname.empty());
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (text.find("model name") != std::string::npos) {
    EXPECT_FALSE(h.cpu_model.empty());
    EXPECT_NE(text.find(h.cpu_model), std::string::npos);
  }
  ASSERT_TRUE(h.load1 && h.load5 && h.load15);
  double l1 = -1;
  std::ifstream("/proc/loadavg") >> l1;
  EXPECT_NEAR(*h.load1, l1, 2.0);  // read a moment apart
  ASSERT_TRUE(h.rss_bytes && h.peak_rss_bytes);
  EXPECT_GE(*h.rss_bytes, ballast.size());
  EXPECT_GE(*h.peak_rss_bytes, *h.rss_bytes);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  // getrusage's peak is in KiB, like VmHWM: the same figure read the other way.
  EXPECT_NEAR(static_cast<double>(*h.peak_rss_bytes), ru.ru_maxrss * 1024.0, 8.0 * 1024 * 1024);
  ASSERT_TRUE(h.cpu_user_s && h.cpu_system_s);
  const double user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  EXPECT_NEAR(*h.cpu_user_s, user, 0.05);  // clock ticks (10 ms) against microseconds
  EXPECT_GE(*h.cpu_system_s, 0.0);
}

TEST(HostMonitor, CpuTimeGrowsWithWork) {
  const double before = *monitor::query_host().cpu_user_s;
  volatile double x = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) x = x + 1.0;
  EXPECT_GT(*monitor::query_host().cpu_user_s, before);
}

TEST(Sampler, PublishesAndStops) {
  monitor::Sampler sampler({std::chrono::milliseconds(2)});
  EXPECT_EQ(sampler.latest(), nullptr);
  EXPECT_FALSE(sampler.running());
  sampler.start();
  EXPECT_TRUE(sampler.running());
  EXPECT_THROW(sampler.start(), ValueError);
  for (int i = 0; i < 1000 && (!sampler.latest() || sampler.latest()->sequence < 3); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto snap = sampler.latest();
  ASSERT_NE(snap, nullptr);
  EXPECT_GE(snap->sequence, 3u);
  EXPECT_TRUE(snap->host.rss_bytes.has_value());
  if (snap->gpus.empty()) {
    EXPECT_FALSE(snap->gpu_unavailable.empty());
  }
  // Readers keep their snapshot while the sampler replaces it.
  const uint64_t held = snap->sequence;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(snap->sequence, held);
  sampler.stop();
  EXPECT_FALSE(sampler.running());
  const uint64_t last = sampler.latest()->sequence;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(sampler.latest()->sequence, last);  // nothing after stop
  sampler.stop();                               // idempotent
}

TEST(Sampler, StopsPromptlyWithALongPeriod) {
  auto start = std::chrono::steady_clock::now();
  {
    monitor::Sampler sampler({std::chrono::seconds(3600)});
    sampler.start();
    for (int i = 0; i < 1000 && !sampler.latest(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }  // the destructor wakes and joins it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(Sampler, RejectsAZeroPeriod) {
  EXPECT_THROW(monitor::Sampler({std::chrono::milliseconds(0)}), ValueError);
}

TEST(Sampler, OnlyWhatIsAskedFor) {
  monitor::Snapshot s = monitor::sample_now(/*gpus=*/false, /*host=*/true);
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_EQ(s.gpu_unavailable, "GPU sampling is off");
  EXPECT_TRUE(s.host.rss_bytes.has_value());
}
