// The status bodies as functions of a snapshot: per-rank JSON round trip (the rank reports' wire
// format), /metrics with GPU figures from two ranks, ranks not heard from left out, and /status.
#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "apps/common/rank_reports.h"
#include "apps/common/status_server.h"
#include "runtime/monitor/prometheus.h"
#include "runtime/error.h"

using namespace tandem;

namespace {

monitor::GpuStats gpu(int index) {
  monitor::GpuStats g;
  g.index = index;
  g.nvml_index = index + 4;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-" + std::to_string(index);
  g.cc_major = 9;
  g.cc_minor = 0;
  g.memory_total = 80ull << 30;
  g.memory_free = 70ull << 30;
  g.memory_used = 10ull << 30;
  g.util_gpu = 97;
  g.power_w = 612.25;
  g.unavailable = "ecc: Not Supported";  // the other optionals stay unavailable
  return g;
}

app::TrainingSnapshot two_ranks() {
  app::TrainingSnapshot s;
  s.state = "running";
  s.model = "mlp";
  s.mode = "ddp";
  s.world_size = 3;
  s.step = 40;
  s.total_steps = 100;
  s.samples = 40 * 96;
  s.loss = 0.5;
  s.lr = 0.01;
  s.eta_seconds = 12.5;
  s.ranks.resize(3);
  for (int r = 0; r < 2; ++r) {
    s.ranks[r].rank = r;
    s.ranks[r].host = "node" + std::to_string(r);
    s.ranks[r].device = "cuda:" + std::to_string(r);
    s.ranks[r].step = 40 - r;
    s.ranks[r].step_seconds = 0.02 + r * 0.001;
    s.ranks[r].peak_rss_bytes = 1000 + r;
    s.ranks[r].gpu = gpu(r);
  }
  s.ranks[2].rank = 2;
  s.ranks[2].step = -1;  // not heard from yet
  return s;
}

}  // namespace

TEST(RankFigures, JsonRoundTrip) {
  app::RankFigures f = two_ranks().ranks[1];
  f.cpu_user_s = 1.5;
  const app::RankFigures back = app::rank_figures_from_json(app::rank_figures_to_json(f));
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.host, "node1");
  EXPECT_EQ(back.device, "cuda:1");
  EXPECT_EQ(back.step, 39);
  EXPECT_DOUBLE_EQ(back.step_seconds, 0.021);
  EXPECT_EQ(back.peak_rss_bytes, 1001u);
  EXPECT_DOUBLE_EQ(back.cpu_user_s, 1.5);
  ASSERT_TRUE(back.gpu.has_value());
  EXPECT_EQ(back.gpu->nvml_index, 5);
  EXPECT_EQ(back.gpu->cc_major, 9);
  EXPECT_EQ(back.gpu->memory_free, 70ull << 30);
  EXPECT_EQ(back.gpu->power_w, 612.25);
  EXPECT_FALSE(back.gpu->temperature_c.has_value());  // unavailable stays unavailable (null)
  EXPECT_EQ(back.gpu->unavailable, "ecc: Not Supported");
  f.gpu.reset();
  EXPECT_FALSE(app::rank_figures_from_json(app::rank_figures_to_json(f)).gpu.has_value());
}

TEST(StatusBodies, MetricsPerRankAndGpu) {
  const std::string m = app::status_metrics(two_ranks());
  EXPECT_NE(m.find("# TYPE tandem_train_steps_total counter\ntandem_train_steps_total 40\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_train_eta_seconds 12.5\n"), std::string::npos);
  EXPECT_NE(m.find("tandem_train_step_seconds{rank=\"1\"} 0.021\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_train_peak_rss_bytes{rank=\"0\"} 1000\n"), std::string::npos);
  EXPECT_EQ(m.find("rank=\"2\""), std::string::npos) << "rank 2 has not reported: no samples";
  EXPECT_NE(m.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"5\",UUID=\"GPU-1\",device=\"nvidia5\",modelName=\"NVIDIA H100 80GB "
                   "HBM3\",Hostname=\"node1\",cuda_index=\"1\",rank=\"1\"} 612.25\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("DCGM_FI_DEV_FB_FREE{gpu=\"4\""), std::string::npos);
  EXPECT_NE(m.find("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n# HELP"), std::string::npos) << "typed, without samples";
}

TEST(StatusBodies, StatusJson) {
  const nlohmann::json j = nlohmann::json::parse(app::status_json(two_ranks(), nullptr));
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["devices"], (nlohmann::json{"cuda:0", "cuda:1", nullptr}));
  EXPECT_EQ(j["eta_seconds"], 12.5);
  EXPECT_TRUE(j["test_accuracy"].is_null());
  EXPECT_TRUE(j["host"].is_null());
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][1]["gpu"]["utilization_gpu_percent"], 97);
  EXPECT_TRUE(j["ranks"][1]["gpu"]["temperature_c"].is_null());
  EXPECT_TRUE(j["ranks"][2]["step"].is_null());
}

// The HTTP layer itself, with httplib's client: routes, content types, JSON errors, stop and join.
TEST(StatusServer, ServesTheBoardAndAnswersErrorsInJson) {
  auto board = std::make_shared<app::StatusBoard>();
  auto sampler = std::make_shared<monitor::Sampler>(monitor::SamplerOptions{std::chrono::milliseconds(10)});
  sampler->start();
  app::StatusServer server(board, sampler);
  const int port = server.start("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  auto r = client.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["state"], "starting");  // nothing published yet
  board->publish(std::make_shared<app::TrainingSnapshot>(two_ranks()));
  r = client.Get("/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(r->body)["step"], 40);
  r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), monitor::kPrometheusContentType);
  EXPECT_NE(r->body.find("tandem_train_steps_total 40\n"), std::string::npos);
  r = client.Get("/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(nlohmann::json::parse(r->body)["error"].get<std::string>().find("/nope"), std::string::npos);
  r = client.Post("/status", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  EXPECT_TRUE(nlohmann::json::parse(r->body).contains("error"));
  r = client.Head("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // A second server cannot take the same port: a clear IOError, not a crash.
  app::StatusServer other(board, sampler);
  EXPECT_THROW(other.start("127.0.0.1", port), IOError);
  server.stop();
  EXPECT_FALSE(client.Get("/health"));  // stopped: nothing listens
}
