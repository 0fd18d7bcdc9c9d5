// The status bodies as functions of a snapshot: per-rank JSON round trip (the rank reports' wire
// format), /metrics with GPU figures from two ranks, ranks not heard from left out, and /status.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// Sends `request` as it is on a fresh connection and returns what comes back until the server
// closes it, or, when it keeps the connection open 3 s after the last byte (less than httplib's
// 5 s keep-alive wait), that followed by kStillOpen.
constexpr const char* kStillOpen = "[the server kept the connection open]";

std::string raw_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
    if (n < 0) reply += kStillOpen;
  }
  ::close(fd);
  return reply;
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

// A request with a body is answered before its body is read (httplib would keep all of it in
// memory, with no limit): a POST announcing 10 GB, or a chunked one, gets its 405 or 404 at once,
// and the connection closes, so that the unread body is never taken for a next request. And on
// loopback only loopback Host names are answered.
TEST(StatusServer, RefusesBodiesWithoutReadingThemAndForeignHostNames) {
  auto board = std::make_shared<app::StatusBoard>();
  app::StatusServer server(board, nullptr);
  const int port = server.start("127.0.0.1", 0);
  std::string r = raw_exchange(port, "POST /status HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10000000000\r\n\r\nab");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_EQ(r.find(kStillOpen), std::string::npos) << r;
  EXPECT_NE(r.find("Allow: GET, HEAD"), std::string::npos) << r;
  r = raw_exchange(port, "PUT /elsewhere HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "fffffffff\r\nabc");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  EXPECT_EQ(r.find(kStillOpen), std::string::npos) << r;
  // The unread body, here requests of their own (more than httplib reads ahead), is not answered
  // as the connection's next requests.
  std::string inner;
  for (int i = 0; i < 400; ++i) inner += "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
  r = raw_exchange(port, "DELETE /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(inner.size()) +
                             "\r\n\r\n" + inner);
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  EXPECT_EQ(r.find("HTTP/1.1", 1), std::string::npos) << r;
  EXPECT_EQ(r.find(kStillOpen), std::string::npos) << r;
  // Bound to loopback, it answers loopback names only: another name is a page of another site made
  // to resolve to 127.0.0.1 (DNS rebinding).
  const std::string loopback_names[] = {"localhost:" + std::to_string(port), "127.0.0.1", "[::1]"};
  for (const std::string& host : loopback_names) {
    r = raw_exchange(port, "GET /status HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << host << ": " << r;
  }
  for (const char* host : {"evil.example", "127.0.0.1.evil.example:80", "localhost:x", ""}) {
    r = raw_exchange(port, std::string("GET /status HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << host << ": " << r;
    EXPECT_NE(r.find("loopback name"), std::string::npos) << r;
  }
  // And the server still serves.
  r = raw_exchange(port, "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  server.stop();
}
