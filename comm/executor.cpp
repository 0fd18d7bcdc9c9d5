// Executor: in-order queue of collectives with a progress thread and caller-side stealing.
#include "comm/executor.h"

namespace tandem::comm {

Executor::~Executor() { shutdown(); }

bool Executor::broken() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !broken_.empty();
}

WorkPtr Executor::submit(std::function<void()> fn) {
  auto w = std::make_shared<QueuedWork>(shared_from_this(), std::move(fn));
  std::unique_lock<std::mutex> lk(mu_);
  TANDEM_CHECK(!stop_, "communicator used after shutdown");
  queue_.push_back(w);
  if (!use_thread_) {
    while (w->state_ != QueuedWork::State::Done) run_front(lk);
    return w;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { thread_main(); });
  lk.unlock();
  cv_.notify_all();
  return w;
}

void Executor::run_front(std::unique_lock<std::mutex>& lk) {
  std::shared_ptr<QueuedWork> w = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  w->state_ = QueuedWork::State::Running;
  std::string broken = broken_;
  lk.unlock();
  std::exception_ptr error;
  std::string message;
  if (!broken.empty()) {
    try {
      TANDEM_FAIL(Comm, "communicator is unusable after an earlier error: {}", broken);
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    try {
      w->fn_();
    } catch (const std::exception& e) {
      error = std::current_exception();
      message = e.what();
    } catch (...) {
      error = std::current_exception();
      message = "unknown exception";
    }
  }
  w->fn_ = nullptr;  // drop captured buffers early
  lk.lock();
  if (!message.empty() && broken_.empty()) broken_ = message;
  w->error_ = error;
  w->state_ = QueuedWork::State::Done;
  busy_ = false;
  cv_.notify_all();
}

void Executor::thread_main() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return (!queue_.empty() && !busy_) || (stop_ && queue_.empty()); });
    if (queue_.empty()) return;  // stop_ and drained
    run_front(lk);
  }
}

void Executor::shutdown() {
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_) return;
    if (!thread_.joinable())  // no thread: drain here
      while (!queue_.empty()) run_front(lk);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void QueuedWork::wait() {
  Executor& ex = *ex_;
  std::unique_lock<std::mutex> lk(ex.mu_);
  if (state_ != State::Done) {
    if (ex.waiters_++ == 0 && ex.wait_hook_) ex.wait_hook_(true);
    while (state_ != State::Done) {
      // Not started and nobody running: run the queue up to this work on our own thread.
      if (state_ == State::Pending && !ex.busy_)
        ex.run_front(lk);
      else
        ex.cv_.wait(lk);
    }
    if (--ex.waiters_ == 0 && ex.wait_hook_) ex.wait_hook_(false);
  }
  if (error_) std::rethrow_exception(error_);
}

bool QueuedWork::is_completed() {
  std::lock_guard<std::mutex> lk(ex_->mu_);
  return state_ == State::Done;
}

}  // namespace tandem::comm
