// The per-communicator executor: collectives run one at a time in issue order, on a progress
// thread (so they overlap the caller) or, when the caller waits on work that has not started yet,
// on the caller's own thread (no thread hand-off on the synchronous path).
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/communicator.h"

namespace tandem::comm {

class Executor;

class QueuedWork final : public Work {
 public:
  QueuedWork(std::shared_ptr<Executor> ex, std::function<void()> fn) : ex_(std::move(ex)), fn_(std::move(fn)) {}
  void wait() override;
  bool is_completed() override;

 private:
  friend class Executor;
  enum class State { Pending, Running, Done };
  std::shared_ptr<Executor> ex_;
  std::function<void()> fn_;
  State state_ = State::Pending;
  std::exception_ptr error_;
};

class Executor : public std::enable_shared_from_this<Executor> {
 public:
  // use_thread=false: every submitted function runs inside submit() on the caller's thread.
  explicit Executor(bool use_thread) : use_thread_(use_thread) {}
  ~Executor();
  // Queues fn; it runs after everything submitted before it. An exception thrown by fn is stored
  // in the Work (rethrown by wait()) and breaks the executor: later work fails with that message.
  WorkPtr submit(std::function<void()> fn);
  // Runs what is queued, then stops the progress thread. The owner calls it before destruction.
  void shutdown();
  bool broken() const;
  // Told true when a caller starts to block in QueuedWork::wait (the first of them) and false when
  // the last one returns: the transport may then spin where it would sleep (the caller's core is
  // free). Set before the first submit.
  void set_wait_hook(std::function<void(bool waiting)> hook) { wait_hook_ = std::move(hook); }

 private:
  friend class QueuedWork;
  void run_front(std::unique_lock<std::mutex>& lk);  // pops the front work and runs it unlocked
  void thread_main();

  const bool use_thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // queue changed, a work finished, or stop
  std::deque<std::shared_ptr<QueuedWork>> queue_;
  bool busy_ = false;
  int waiters_ = 0;  // callers blocked in QueuedWork::wait
  std::function<void(bool)> wait_hook_;
  bool stop_ = false;
  std::string broken_;  // the first error's message; non-empty once broken
  std::thread thread_;
};

}  // namespace tandem::comm
