// Stop on SIGTERM: a cancelled run (tandem-serve's DELETE /jobs/{id}, a batch scheduler's
// preemption) ends at the next step boundary, all ranks at the same step, so that --save writes
// its end-of-run checkpoint instead of the process dying mid-step.
#pragma once
#include "train/trainer.h"

namespace tandem::train {

// Installs a SIGTERM handler that only raises a flag (async-signal-safe). Idempotent.
void install_stop_on_sigterm();
// True once SIGTERM was received by this process.
bool stop_signal_received();

// Every rank's flag, OR-ed over the ranks in `t`'s step agreement (8 bytes, after backward), so
// that all stop at the same step; after that step's optimizer step, Trainer::request_stop(). fit()
// then ends the epoch, writes the "done" record with "stopped": true, and checkpoints when --save
// is given.
class StopOnSignal final : public TrainerCallback {
 public:
  explicit StopOnSignal(Trainer& t);
  void after_step(Trainer& t) override;
  bool stopped() const { return stopped_; }

 private:
  size_t share_;
  bool stopped_ = false;
};

}  // namespace tandem::train
