// DeviceWorkers: one persistent thread per device. run(fn) calls fn(k) on thread k for every k and
// waits for all; the first exception is rethrown on the caller. A thread always serves the same
// device, so each member of an in-process communicator group is driven by its own thread.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::nn::parallel {

class DeviceWorkers {
 public:
  explicit DeviceWorkers(size_t n);
  ~DeviceWorkers();
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  void run(const std::function<void(size_t k)>& fn);
  size_t size() const { return threads_.size(); }

 private:
  void loop(size_t k);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(size_t)>* task_ = nullptr;
  uint64_t generation_ = 0;
  size_t remaining_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace tandem::nn::parallel
