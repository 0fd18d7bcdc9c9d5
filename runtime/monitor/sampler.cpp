// The sampler thread: sample, publish under the mutex (readers copy a shared_ptr, never wait on a
// sample being taken), sleep on a condition variable so stop() wakes it at once.
#include "runtime/monitor/sampler.h"

#include "runtime/error.h"

namespace tandem::monitor {

Snapshot sample_now(bool gpus, bool host) {
  Snapshot s;
  s.time = std::chrono::system_clock::now();
  if (gpus) {
    s.gpus = query_gpus();
    if (s.gpus.empty()) s.gpu_unavailable = gpu_unavailable_reason();
  } else {
    s.gpu_unavailable = "GPU sampling is off";
  }
  if (host) s.host = query_host();
  return s;
}

Sampler::Sampler(SamplerOptions options) : options_(options) {
  TANDEM_CHECK(options_.period.count() > 0, "Sampler: period must be positive, got {} ms", options_.period.count());
}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(!thread_.joinable(), "Sampler::start: already started");
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Sampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  thread_ = std::thread();
}

bool Sampler::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return thread_.joinable() && !stop_;
}

std::shared_ptr<const Snapshot> Sampler::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

void Sampler::run() {
  uint64_t sequence = 0;
  for (;;) {
    // Sampling may take milliseconds (NVML); the mutex is held only to publish.
    auto snap = std::make_shared<Snapshot>(sample_now(options_.gpus, options_.host));
    snap->sequence = ++sequence;
    std::unique_lock<std::mutex> lock(mutex_);
    latest_ = std::move(snap);
    if (wake_.wait_for(lock, options_.period, [this] { return stop_; })) return;
  }
}

}  // namespace tandem::monitor
