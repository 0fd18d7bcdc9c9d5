// DeviceWorkers: a generation counter wakes every thread for one task; the last to finish wakes the caller.
#include "nn/parallel/device_workers.h"

#include <omp.h>

namespace tandem::nn::parallel {

// A new thread starts with OpenMP's default thread count, not the one the creating thread set
// (tandem-train's --threads): each worker takes the creator's.
DeviceWorkers::DeviceWorkers(size_t n) : errors_(n) {
  const int omp_threads = omp_get_max_threads();
  for (size_t k = 0; k < n; ++k)
    threads_.emplace_back([this, k, omp_threads] {
      omp_set_num_threads(omp_threads);
      loop(k);
    });
}

DeviceWorkers::~DeviceWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void DeviceWorkers::run(const std::function<void(size_t)>& fn) {
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &fn;
  remaining_ = threads_.size();
  for (auto& e : errors_) e = nullptr;
  ++generation_;
  start_cv_.notify_all();
  done_cv_.wait(lock, [&] { return remaining_ == 0; });
  task_ = nullptr;
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void DeviceWorkers::loop(size_t k) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr err;
    try {
      (*task)(k);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_[k] = err;
      if (--remaining_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace tandem::nn::parallel
