// The operations flags and StatusService::start.
#include "apps/common/operations.h"

#include <chrono>

#include "apps/common/cli_checks.h"
#include "apps/common/loopback.h"
#include "runtime/error.h"
#include "runtime/memory_budget.h"
#include "runtime/monitor/device_selection.h"

namespace tandem::app {

void add_operations_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_option("--min-free-memory", cfg.min_free_memory,
                 "--device auto: skip GPUs with less free memory than this (e.g. 512MB, 2GB, 1.5GiB)")
      ->check([](const std::string& text) -> std::string {
        try {
          memory::parse_size(text);
          return "";
        } catch (const Error&) {
          return "not a size: " + text + " (e.g. 512MB, 2GB)";
        }
      })
      ->capture_default_str();
  app.add_option("--status-port", cfg.status_port,
                 "rank 0 serves GET /health, /status (JSON), /metrics (Prometheus) on this port (0: a free port, "
                 "printed at start)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--status-bind", cfg.status_bind, "address the status port listens on (loopback unless told)")
      ->capture_default_str();
  app.add_option("--monitor-period", cfg.monitor_period,
                 "seconds between host and GPU samples with --status-port (0: no sampling)")
      ->check(kNonNegative)
      ->capture_default_str();
}

std::unique_ptr<StatusService> StatusService::start(const TrainConfig& cfg, Trainer& trainer, Device device,
                                                    const std::string& mode, const std::string& device_reason,
                                                    const Logger& log) {
  if (cfg.status_port < 0) return nullptr;
  auto service = std::unique_ptr<StatusService>(new StatusService());
  if (cfg.monitor_period > 0) {
    monitor::SamplerOptions so;
    so.period = std::chrono::milliseconds(static_cast<int64_t>(cfg.monitor_period * 1000 + 0.5));
    if (so.period.count() == 0) so.period = std::chrono::milliseconds(1);
    service->sampler_ = std::make_shared<monitor::Sampler>(so);
    service->sampler_->start();
  }
  service->board_ = std::make_shared<StatusBoard>();
  auto reports = std::make_shared<RankReports>(trainer.world().size());  // collective with several ranks
  TrainingSnapshot job;
  job.model = cfg.model.type;
  job.mode = mode;
  job.world_size = trainer.world().size();
  job.device_reason = device_reason;
  trainer.add_callback(
      std::make_shared<StatusPublisher>(service->board_, service->sampler_, std::move(reports), job, device));
  if (trainer.world().rank() == 0) {
    service->server_ = std::make_unique<StatusServer>(service->board_, service->sampler_);
    service->port_ = service->server_->start(cfg.status_bind, cfg.status_port);
    log.result("status: http://{}:{}/status", cfg.status_bind, service->port_);
    if (!is_loopback_address(cfg.status_bind))
      log.result("status: listening on {} (not loopback): anyone who reaches it can read this run's status",
                 cfg.status_bind);
  }
  return service;
}

}  // namespace tandem::app
