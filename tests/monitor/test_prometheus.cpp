// The Prometheus writer: the text format's escaping and structure, and the DCGM families present
// without a GPU. (check_metrics.py parses the same output with prometheus_client.)
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/error.h"
#include "runtime/monitor/prometheus.h"

using namespace tandem;
using monitor::PrometheusWriter;

TEST(Prometheus, WritesHelpTypeAndSamples) {
  PrometheusWriter w;
  w.family("tandem_train_steps_total", "counter", "Optimizer steps taken.");
  w.sample("tandem_train_steps_total", {}, 42);
  w.family("tandem_train_step_seconds", "gauge", "Step time\nper rank \\ mean.");
  w.sample("tandem_train_step_seconds", {{"rank", "0"}}, 0.0125);
  w.sample("tandem_train_step_seconds", {{"rank", "1"}}, std::numeric_limits<double>::quiet_NaN());
  w.sample("tandem_train_step_seconds", {{"rank", "2"}}, std::numeric_limits<double>::infinity());
  EXPECT_EQ(w.str(),
            "# HELP tandem_train_steps_total Optimizer steps taken.\n"
            "# TYPE tandem_train_steps_total counter\n"
            "tandem_train_steps_total 42\n"
            "# HELP tandem_train_step_seconds Step time\\nper rank \\\\ mean.\n"
            "# TYPE tandem_train_step_seconds gauge\n"
            "tandem_train_step_seconds{rank=\"0\"} 0.0125\n"
            "tandem_train_step_seconds{rank=\"1\"} NaN\n"
            "tandem_train_step_seconds{rank=\"2\"} +Inf\n");
}

TEST(Prometheus, EscapesLabelValues) {
  EXPECT_EQ(monitor::escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  PrometheusWriter w;
  w.family("x", "gauge", "h");
  w.sample("x", {{"model", "Fake \"GPU\" \\ C"}}, 1);
  EXPECT_NE(w.str().find("x{model=\"Fake \\\"GPU\\\" \\\\ C\"} 1\n"), std::string::npos) << w.str();
}

TEST(Prometheus, RejectsBadNamesAndRepeats) {
  PrometheusWriter w;
  EXPECT_THROW(w.family("1abc", "gauge", "h"), ValueError);
  EXPECT_THROW(w.family("a-b", "gauge", "h"), ValueError);
  EXPECT_THROW(w.family("ok", "histogramm", "h"), ValueError);
  w.family("ok", "gauge", "h");
  EXPECT_THROW(w.family("ok", "gauge", "h"), ValueError);
  EXPECT_THROW(w.sample("ok", {{"__reserved", "v"}}, 1), ValueError);
  EXPECT_THROW(w.sample("ok", {{"a:b", "v"}}, 1), ValueError);
}

TEST(Prometheus, GpuFamiliesWithoutAGpu) {
  PrometheusWriter w;
  monitor::write_gpu_metrics(w, {}, "host");
  for (const char* f : {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
                        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                        "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_SM_CLOCK"})
    EXPECT_NE(w.str().find(std::string("# TYPE ") + f + " gauge\n"), std::string::npos) << f;
  EXPECT_NE(w.str().find("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"), std::string::npos);
  EXPECT_EQ(w.str().find("{"), std::string::npos) << "no samples without a GPU";
}

TEST(Prometheus, GpuSamplesInDcgmUnits) {
  monitor::GpuStats g;
  g.index = 0;
  g.nvml_index = 3;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-abc";
  g.memory_used = 1536ull << 20;   // 1536 MiB
  g.memory_free = (5ull << 30) + 5;  // 5120 MiB and 5 bytes: whole MiB, as DCGM reports
  g.power_w = 312.5;
  PrometheusWriter w;
  monitor::write_gpu_metrics(w, {g}, "node7", {{"rank", "1"}});
  const std::string labels =
      "{gpu=\"3\",UUID=\"GPU-abc\",device=\"nvidia3\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node7\","
      "cuda_index=\"0\",rank=\"1\"}";
  EXPECT_NE(w.str().find("DCGM_FI_DEV_FB_USED" + labels + " 1536\n"), std::string::npos) << w.str();
  EXPECT_NE(w.str().find("DCGM_FI_DEV_FB_FREE" + labels + " 5120\n"), std::string::npos) << w.str();
  EXPECT_NE(w.str().find("DCGM_FI_DEV_POWER_USAGE" + labels + " 312.5\n"), std::string::npos) << w.str();
  EXPECT_EQ(w.str().find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos) << "unavailable: no sample";
}
