// The status endpoint over cpp-httplib (Debian's libcpp-httplib): three read-only routes, JSON
// errors for the rest. The handlers copy two shared_ptrs and format; they never touch the loop.
#include "apps/common/status_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "apps/common/loopback.h"
#include "apps/common/monitor_json.h"
#include "apps/common/rank_reports.h"
#include "runtime/error.h"
#include "runtime/monitor/prometheus.h"

namespace tandem::app {

namespace {

nlohmann::json rank_json(const RankFigures& r) {
  nlohmann::json j = nlohmann::json::parse(rank_figures_to_json(r));
  j["age_seconds"] = r.age_seconds;
  if (r.step < 0) j["step"] = nullptr;  // not heard from yet
  return j;
}

}  // namespace

std::string status_json(const TrainingSnapshot& s, const monitor::Snapshot* host) {
  nlohmann::json devices = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const RankFigures& r : s.ranks) {
    devices.push_back(r.device.empty() ? nlohmann::json() : nlohmann::json(r.device));
    ranks.push_back(rank_json(r));
  }
  nlohmann::json j{{"state", s.state},
                   {"model", s.model},
                   {"mode", s.mode},
                   {"world_size", s.world_size},
                   {"devices", devices},
                   {"device_reason", s.device_reason},
                   {"epoch", s.epoch},
                   {"epochs", s.epochs},
                   {"step", s.step},
                   {"total_steps", s.total_steps},
                   {"samples", s.samples},
                   {"loss", s.loss},
                   {"lr", s.lr},
                   {"samples_per_second", s.samples_per_second},
                   {"elapsed_seconds", s.elapsed_seconds},
                   {"eta_seconds", monitor::json_or_null(s.eta_seconds)},
                   {"test_accuracy", monitor::json_or_null(s.test_accuracy)},
                   {"ranks", ranks},
                   {"gpu_unavailable", s.gpu_unavailable},
                   {"status_seconds_per_step", s.status_seconds_per_step}};
  j["host"] = host ? nlohmann::json(host->host) : nlohmann::json();
  return j.dump();
}

std::string status_metrics(const TrainingSnapshot& s) {
  monitor::PrometheusWriter w;
  auto gauge = [&w](const char* name, const char* help, double v) {
    w.family(name, "gauge", help);
    w.sample(name, {}, v);
  };
  w.family("tandem_train_steps_total", "counter", "Optimizer steps taken.");
  w.sample("tandem_train_steps_total", {}, static_cast<double>(s.step));
  w.family("tandem_train_samples_total", "counter", "Training samples processed, all ranks (steps x global batch).");
  w.sample("tandem_train_samples_total", {}, static_cast<double>(s.samples));
  gauge("tandem_train_total_steps", "Optimizer steps the run will take.", static_cast<double>(s.total_steps));
  gauge("tandem_train_epoch", "The epoch in progress (1-based).", static_cast<double>(s.epoch));
  gauge("tandem_train_world_size", "Ranks training together.", s.world_size);
  gauge("tandem_train_running", "1 while training, 0 once done.", s.state == "running" ? 1 : 0);
  gauge("tandem_train_loss", "Rank 0's latest step loss (batch mean).", s.loss);
  gauge("tandem_train_learning_rate", "The learning rate now.", s.lr);
  gauge("tandem_train_samples_per_second", "Training throughput over the recent steps, all ranks.",
        s.samples_per_second);
  gauge("tandem_train_elapsed_seconds", "Seconds since training began.", s.elapsed_seconds);
  w.family("tandem_train_eta_seconds", "gauge", "Seconds to the last step at the recent pace.");
  if (s.eta_seconds) w.sample("tandem_train_eta_seconds", {}, *s.eta_seconds);
  struct PerRank {
    const char* name;
    const char* help;
    double (*value)(const RankFigures&);
  };
  const PerRank per_rank[] = {
      {"tandem_train_step_seconds", "Mean step time over the rank's recent steps.",
       [](const RankFigures& r) { return r.step_seconds; }},
      {"tandem_train_rss_bytes", "Resident memory of the rank's process.",
       [](const RankFigures& r) { return static_cast<double>(r.rss_bytes); }},
      {"tandem_train_peak_rss_bytes", "Peak resident memory of the rank's process.",
       [](const RankFigures& r) { return static_cast<double>(r.peak_rss_bytes); }},
      {"tandem_train_report_age_seconds", "Age of the rank's figures when published.",
       [](const RankFigures& r) { return r.age_seconds; }},
  };
  for (const PerRank& p : per_rank) {
    w.family(p.name, "gauge", p.help);
    for (const RankFigures& r : s.ranks)
      if (r.step >= 0) w.sample(p.name, {{"rank", std::to_string(r.rank)}}, p.value(r));
  }
  w.family("tandem_train_cpu_seconds_total", "counter", "CPU time of the rank's process.");
  for (const RankFigures& r : s.ranks) {
    if (r.step < 0) continue;
    w.sample("tandem_train_cpu_seconds_total", {{"rank", std::to_string(r.rank)}, {"mode", "user"}}, r.cpu_user_s);
    w.sample("tandem_train_cpu_seconds_total", {{"rank", std::to_string(r.rank)}, {"mode", "system"}}, r.cpu_system_s);
  }
  std::vector<monitor::GpuSource> gpus;
  for (const RankFigures& r : s.ranks)
    if (r.gpu) gpus.push_back({{*r.gpu}, r.host, {{"rank", std::to_string(r.rank)}}});
  monitor::write_gpu_metrics(w, gpus);
  return w.str();
}

struct StatusServer::Impl {
  std::shared_ptr<const StatusBoard> board;
  std::shared_ptr<const monitor::Sampler> sampler;
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> ended{false};  // listen_after_bind returned
  bool loopback = true;             // bound to a loopback address: answers loopback Host names only
};

namespace {

void json_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}, {"status", status}}.dump(), "application/json");
}

void no_such_path(httplib::Response& res, const std::string& path) {
  json_error(res, 404, "no such path: " + path + " (try /health, /status, /metrics)");
}

}  // namespace

StatusServer::StatusServer(std::shared_ptr<const StatusBoard> board, std::shared_ptr<const monitor::Sampler> sampler)
    : impl_(std::make_unique<Impl>()) {
  impl_->board = std::move(board);
  impl_->sampler = std::move(sampler);
  Impl* impl = impl_.get();
  httplib::Server& svr = impl->server;
  // httplib's default sets SO_REUSEPORT, with which a second job given the same --status-port
  // binds it too and the kernel splits the connections between the two. SO_REUSEADDR only: a
  // port in use is an error, one in TIME_WAIT from a previous run is not.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  svr.Get("/health", [impl](const httplib::Request&, httplib::Response& res) {
    auto s = impl->board->latest();
    res.set_content(nlohmann::json{{"status", "ok"}, {"state", s ? s->state : "starting"}}.dump(), "application/json");
  });
  svr.Get("/status", [impl](const httplib::Request&, httplib::Response& res) {
    auto s = impl->board->latest();
    auto host = impl->sampler ? impl->sampler->latest() : nullptr;
    res.set_content(status_json(s ? *s : TrainingSnapshot{}, host.get()), "application/json");
  });
  svr.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    auto s = impl->board->latest();
    res.set_content(status_metrics(s ? *s : TrainingSnapshot{}), monitor::kPrometheusContentType);
  });
  // Other methods: 405 on the three paths (naming what is allowed), 404 elsewhere, answered before
  // routing, where httplib would first read the request's body into memory, however large (no body
  // is ever needed here). One request per connection: the body left unread must not be taken for
  // a next request (httplib closes a connection only when it has served its keep-alive count).
  svr.set_keep_alive_max_count(1);
  svr.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    // On loopback, by a loopback name only: a page of another site made to resolve to 127.0.0.1
    // (DNS rebinding) sends its own name (apps/common/loopback.h) and reads nothing.
    if (impl->loopback && !is_loopback_host(req.get_header_value("Host"))) {
      json_error(res, 403, "this status port answers requests by a loopback name (127.0.0.1, localhost, [::1]), "
                           "not '" + req.get_header_value("Host") + "'");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "GET" || req.method == "HEAD") return httplib::Server::HandlerResponse::Unhandled;
    if (req.path == "/health" || req.path == "/status" || req.path == "/metrics") {
      res.set_header("Allow", "GET, HEAD");
      json_error(res, 405, req.method + " is not allowed on " + req.path + "; use GET");
    } else {
      no_such_path(res, req.path);
    }
    return httplib::Server::HandlerResponse::Handled;
  });
  // Routing found nothing (or a handler left an error without a body): a JSON error.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404) no_such_path(res, req.path);
    else if (res.body.empty()) json_error(res, res.status, "bad request");
  });
}

StatusServer::~StatusServer() { stop(); }

int StatusServer::start(const std::string& address, int port) {
  TANDEM_CHECK(!impl_->thread.joinable(), "StatusServer::start: already serving");
  TANDEM_CHECK(port >= 0 && port <= 65535, "--status-port {}: not a port (0-65535)", port);
  impl_->loopback = is_loopback_address(address);
  int bound = port;
  if (port == 0) {
    bound = impl_->server.bind_to_any_port(address);
  } else if (!impl_->server.bind_to_port(address, port)) {
    bound = -1;
  }
  TANDEM_CHECK_KIND(IO, bound > 0, "status server: cannot listen on {}:{} (address not of this host, or port in use)",
                    address, port);
  impl_->ended = false;
  impl_->thread = std::thread([impl = impl_.get()] {
    impl->server.listen_after_bind();
    impl->ended = true;
  });
  // Serving before returning: httplib's stop() does nothing to a server that has not started
  // listening yet, so a stop() racing the thread's start would leave join() waiting forever.
  while (!impl_->server.is_running() && !impl_->ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!impl_->server.is_running()) {
    impl_->thread.join();
    TANDEM_FAIL(IO, "status server: listening on {}:{} failed", address, bound);
  }
  return bound;
}

void StatusServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace tandem::app
