// Per-step metrics records (--metrics-every N): what a live view (tandem-serve's dashboard and job
// progress) needs between the epoch records, written by rank 0 without any communication.
#pragma once
#include <cstdint>

#include "train/trainer.h"

namespace tandem::train {

// Every `every` optimizer steps, rank 0 appends
//   {"event":"step","step":s,"total_steps":T,"epoch":e,"loss":l,"lr":lr,"samples_per_s":r,"time":t}
// to the metrics file: l is rank 0's loss of that step, r all ranks' samples per second since
// the previous record (rank 0's count times the world size), T the steps the run will take, t the
// Unix time of the record (seconds).
class StepMetrics final : public TrainerCallback {
 public:
  explicit StepMetrics(int64_t every) : every_(every) {}
  void on_train_begin(Trainer& t) override;
  void after_step(Trainer& t) override;

 private:
  int64_t every_;
  int64_t last_step_ = 0;
  double last_time_ = 0;
};

}  // namespace tandem::train
