// tandem-train's status endpoint (--status-port, rank 0): GET /health, GET /status (JSON),
// GET /metrics (Prometheus text 0.0.4: tandem_train_* and the DCGM-named GPU gauges of every
// rank's device). cpp-httplib on a thread of its own that only reads the StatusBoard and the
// sampler's snapshot, so serving never blocks training. Unknown paths answer a JSON 404, other
// methods on known paths a JSON 405 with Allow; bound to loopback, it answers requests by a loopback
// Host name only (403 otherwise: DNS rebinding).
#pragma once
#include "apps/common/engine.h"
#include <memory>
#include <string>

#include "apps/common/status_publisher.h"

namespace tandem::app {

// The bodies, as functions of the snapshots (tested without a server). `host` may be null.
std::string status_json(const TrainingSnapshot& s, const monitor::Snapshot* host);
std::string status_metrics(const TrainingSnapshot& s);

class StatusServer {
 public:
  StatusServer(std::shared_ptr<const StatusBoard> board, std::shared_ptr<const monitor::Sampler> sampler);
  ~StatusServer();  // stops and joins
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds `address`:`port` (0: a free port) and starts serving; returns the port. IOError when the
  // address cannot be bound (in use, not an address of this host).
  int start(const std::string& address, int port);
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::app
