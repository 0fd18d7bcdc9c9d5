// Where a training run stands, as the loop publishes it once per step: the job (mode, world,
// progress, loss, throughput, ETA) and each rank's figures (step time, memory, its device's GPU
// figures). Read by the status server (status_server.h) and by anything else that shows progress;
// plain data, so readers copy or share it without touching the loop.
#pragma once
#include "apps/common/engine.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/monitor/gpu_monitor.h"

namespace tandem::app {

// One rank's figures, as the rank measured them (rank 0 receives the others' every few steps).
struct RankFigures {
  int rank = 0;
  std::string host;
  std::string device;              // "cpu:0", "cuda:1"
  int64_t step = 0;                // the rank's step count when measured
  double step_seconds = 0;         // mean over the rank's recent steps
  uint64_t rss_bytes = 0, peak_rss_bytes = 0;
  double cpu_user_s = 0, cpu_system_s = 0;
  std::optional<monitor::GpuStats> gpu;  // its device's figures (none on the CPU or without NVML)
  double age_seconds = 0;          // how old these figures are at publication (0 for rank 0's own)
};

struct TrainingSnapshot {
  std::string state = "starting";  // starting | running | done
  std::string model, mode;         // "mlp", "ddp"
  int world_size = 1;
  std::string device_reason;       // why this device (--device auto), or empty
  int64_t epoch = 0, epochs = 0;   // the epoch in progress, 1-based, of epochs
  int64_t step = 0, total_steps = 0;  // optimizer steps taken, of the run's steps
  int64_t samples = 0;             // training samples processed, all ranks
  double loss = 0;                 // rank 0's latest step loss (batch mean)
  double lr = 0;
  double samples_per_second = 0;   // all ranks, over the recent steps
  double elapsed_seconds = 0;      // since training began
  std::optional<double> eta_seconds;  // to total_steps at the recent pace
  std::optional<double> test_accuracy;  // after the latest evaluation
  std::vector<RankFigures> ranks;  // indexed by rank; a rank not heard from yet has step -1
  std::string gpu_unavailable;     // rank 0's NVML reason where it has no GPU figures
  double status_seconds_per_step = 0;  // what publishing this costs rank 0's training thread, per step
};

}  // namespace tandem::app
