// The services every tandem-train run attaches (run_services.h), in the order the loop needs them.
#include "apps/common/run_services.h"

#include "train/progress.h"
#include "train/step_metrics.h"
#include "train/stop_signal.h"
#include "train/trace_run.h"

namespace tandem::app {

RunServices::RunServices(const TrainConfig& cfg, FullTrainer& trainer, Device device, const Logger& log)
    : cfg_(cfg), ps_(trainer.parallel()), log_(log) {
  if (auto progress = make_progress(cfg, ps_.rank())) trainer.add_callback(progress);
  start_trace(cfg.trace_path, ps_);
  if (cfg.metrics_every > 0) trainer.add_callback(std::make_shared<StepMetrics>(cfg.metrics_every));
  if (!cfg.save_dir.empty()) {  // SIGTERM: stop at a step boundary and write the end-of-run checkpoint
    install_stop_on_sigterm();
    trainer.add_callback(std::make_shared<StopOnSignal>(trainer));
  }
  status_ = StatusService::start(cfg, trainer, device, enum_name(cfg.mode), ps_.device_reason, log);
}

void RunServices::finish() { finish_trace(cfg_.trace_path, ps_, log_); }

}  // namespace tandem::app
