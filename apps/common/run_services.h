// What every tandem-train run attaches to its trainer, whatever the model trains on: the progress
// line, --trace, step records (--metrics-every), the stop at a step boundary on SIGTERM with --save
// (tandem-serve's cancel) and the live status server (--status-port). One place, so that a new kind
// of run (the gpt one) cannot take these flags and silently do nothing with them.
#pragma once
#include "apps/common/engine.h"
#include <memory>
#include <string>

#include "train/logging.h"
#include "apps/common/operations.h"
#include "train/train_features.h"

namespace tandem::app {

class RunServices {
 public:
  // After any resume and before fit(). Collective in ddp mode (the trace's barrier, the status
  // service's rank reports): every rank constructs it.
  RunServices(const TrainConfig& cfg, FullTrainer& trainer, Device device, const Logger& log);
  // After fit(): the trace written (collective in ddp mode).
  void finish();

 private:
  const TrainConfig& cfg_;
  const ParallelSetup& ps_;
  const Logger& log_;
  std::unique_ptr<StatusService> status_;
};

}  // namespace tandem::app
