// The live status of a run (tandem-train --status-port): a TrainerCallback that, once per step,
// builds a TrainingSnapshot from the loop's figures and publishes it on a StatusBoard; the HTTP
// thread (status_server.h) only reads the board. Per-rank figures come from each rank's monitor
// Sampler and reach rank 0 through RankReports, without a collective or a wait in the step.
#pragma once
#include "apps/common/engine.h"
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "apps/common/rank_reports.h"
#include "apps/common/status_snapshot.h"
#include "train/trainer.h"
#include "runtime/monitor/sampler.h"

namespace tandem::app {

// The latest snapshot, swapped under a mutex: the writer never waits on a reader's formatting.
class StatusBoard {
 public:
  void publish(std::shared_ptr<const TrainingSnapshot> snapshot);
  std::shared_ptr<const TrainingSnapshot> latest() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const TrainingSnapshot> latest_;
};

class StatusPublisher : public TrainerCallback {
 public:
  // `job`: the fixed fields (model, mode, world size, device reason); `device`: this rank's device;
  // `sampler` (may be null: no host or GPU figures); every rank but 0 reports every `report_every` steps.
  StatusPublisher(std::shared_ptr<StatusBoard> board, std::shared_ptr<const monitor::Sampler> sampler,
                  std::shared_ptr<RankReports> reports, TrainingSnapshot job, Device device, int report_every = 5);

  void on_train_begin(Trainer& t) override;
  void on_epoch_begin(Trainer& t, int64_t epoch) override;
  void after_step(Trainer& t) override;
  void on_epoch_end(Trainer& t, const EpochStats& stats) override;
  void on_train_end(Trainer& t, const TrainResult& result) override;

 private:
  using Clock = std::chrono::steady_clock;
  RankFigures own_figures(int64_t step) const;
  void take_reports(std::vector<RankFigures> reports);
  void publish(Trainer& t);

  std::shared_ptr<StatusBoard> board_;
  std::shared_ptr<const monitor::Sampler> sampler_;
  std::shared_ptr<RankReports> reports_;
  TrainingSnapshot job_;
  Device device_;
  int report_every_;
  int rank_ = 0;
  int64_t global_batch_ = 0;  // samples per optimizer step, all ranks
  Clock::time_point begin_, last_step_;
  std::deque<double> recent_;  // the latest step times (seconds), at most kWindow
  double recent_sum_ = 0;
  std::vector<Clock::time_point> received_;  // when rank r's figures arrived
  std::vector<RankFigures> ranks_;
  std::optional<double> test_accuracy_;
  double own_seconds_ = 0;  // time after_step spent on this thread, all steps (the overhead)
  int64_t own_steps_ = 0;
  static constexpr size_t kWindow = 20;
};

}  // namespace tandem::app
