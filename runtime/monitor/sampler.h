// A thread that reads the GPU and host figures every `period` and keeps the latest snapshot for
// readers (an HTTP thread, a progress line). It never touches the training stream or the training
// thread: NVML and /proc only. Started explicitly; stopped (and joined) by stop() or the destructor.
//
//   monitor::Sampler sampler({std::chrono::seconds(1)});
//   sampler.start();
//   auto snap = sampler.latest();   // shared_ptr<const Snapshot>, null before the first sample
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/monitor/gpu_monitor.h"
#include "runtime/monitor/host_monitor.h"

namespace tandem::monitor {

struct Snapshot {
  std::chrono::system_clock::time_point time;
  uint64_t sequence = 0;            // 1 for the first sample, then counting
  std::vector<GpuStats> gpus;       // query_gpus()
  std::string gpu_unavailable;      // gpu_unavailable_reason() when `gpus` is empty
  HostStats host;                   // query_host()
};

// One sample now, on the calling thread.
Snapshot sample_now(bool gpus = true, bool host = true);

struct SamplerOptions {
  std::chrono::milliseconds period{1000};
  bool gpus = true;  // NVML queries (each GPU ~10 calls)
  bool host = true;  // /proc reads
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options = {});
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Starts the thread (the first sample is taken at once). Calling it twice is an error (ValueError).
  void start();
  // Stops and joins the thread; latest() keeps the last snapshot. Idempotent.
  void stop();
  bool running() const;
  // The latest snapshot, shared with the sampler; null until the first sample.
  std::shared_ptr<const Snapshot> latest() const;
  const SamplerOptions& options() const { return options_; }

 private:
  void run();

  SamplerOptions options_;
  mutable std::mutex mutex_;  // guards latest_ and stop_
  std::condition_variable wake_;
  std::shared_ptr<const Snapshot> latest_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tandem::monitor
