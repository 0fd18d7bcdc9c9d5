// tandem-train's operations flags (--min-free-memory, --status-port, --status-bind,
// --monitor-period) and the status service they start: a monitor Sampler on every rank, the
// StatusPublisher callback, the rank reports and, on rank 0, the HTTP server (docs/operations.md).
#pragma once
#include "apps/common/engine.h"
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "train/metrics.h"
#include "apps/common/status_publisher.h"
#include "apps/common/status_server.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace tandem::app {

void add_operations_flags(CLI::App& app, TrainConfig& cfg);

class StatusService {
 public:
  // Null without --status-port. Otherwise starts the sampler (every rank), registers the publisher
  // on `trainer`, and on rank 0 binds the server and logs its URL ("status: http://ADDR:PORT/status").
  // Collective when the job has several ranks (the rank reports' communicator): every rank calls it.
  static std::unique_ptr<StatusService> start(const TrainConfig& cfg, Trainer& trainer, Device device,
                                              const std::string& mode, const std::string& device_reason,
                                              const Logger& log);
  int port() const { return port_; }
  std::shared_ptr<const StatusBoard> board() const { return board_; }

 private:
  std::shared_ptr<monitor::Sampler> sampler_;
  std::shared_ptr<StatusBoard> board_;
  std::unique_ptr<StatusServer> server_;
  int port_ = -1;
};

}  // namespace tandem::app
