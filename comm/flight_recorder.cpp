// FlightRecorder: a mutex-guarded ring of the last collectives, and its JSON dump.
#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "runtime/env_settings.h"

namespace tandem::comm {

void dump_identified_recorders();

namespace {
int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}
const char* state_name(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::Enqueued: return "enqueued";
    case FlightRecorder::State::Started: return "started";
    case FlightRecorder::State::Completed: return "completed";
    case FlightRecorder::State::Failed: return "failed";
  }
  return "?";
}
}  // namespace

namespace {
// The recorders a SIGUSR1 dumps, and the pipe from the signal handler to the dumping thread.
struct Registry {
  std::mutex mu;
  std::vector<FlightRecorder*> live;
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the dumping thread may outlive static destructors
  return *r;
}
std::atomic<int> g_signal_pipe{-1};

void on_sigusr1(int) {  // async-signal-safe: one write(2)
  int fd = g_signal_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) {
    char c = 1;
    ssize_t r = ::write(fd, &c, 1);
    (void)r;
  }
}

void install_sigusr1_dump() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    g_signal_pipe = fds[1];
    std::thread([fd = fds[0]] {
      char c;
      for (;;) {
        ssize_t r = ::read(fd, &c, 1);
        if (r > 0) dump_identified_recorders();
        else if (r < 0 && errno != EINTR) return;
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &sa, nullptr);
  });
}
}  // namespace

void dump_identified_recorders() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (size_t i = 0; i < reg.live.size(); ++i) {
    const FlightRecorder* f = reg.live[i];
    std::string path = f->dump(f->rank_, f->size_, i == 0 ? "" : fmt::format("-comm{}", i));
    std::fprintf(stderr, "tandem: SIGUSR1: flight record of rank %d written to %s\n", f->rank_,
                 path.empty() ? "(nowhere: cannot write TANDEM_FLIGHT_DIR)" : path.c_str());
  }
}

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

FlightRecorder::~FlightRecorder() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.live.erase(std::remove(reg.live.begin(), reg.live.end(), this), reg.live.end());
}

void FlightRecorder::identify(int rank, int size) {
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    rank_ = rank;
    size_ = size;
    if (std::find(reg.live.begin(), reg.live.end(), this) == reg.live.end()) reg.live.push_back(this);
  }
  install_sigusr1_dump();
}

uint64_t FlightRecorder::enqueued(const char* name, int64_t count, DType dtype) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t call = next_call_++;
  Entry& e = ring_[call % ring_.size()];
  e = Entry{};
  e.call = call;
  e.name = name;
  e.bytes = count * static_cast<int64_t>(dtype_size(dtype));
  e.dtype = dtype;
  e.enqueued_us = now_us();
  return call;
}

FlightRecorder::Entry* FlightRecorder::find(uint64_t call) {
  Entry& e = ring_[call % ring_.size()];
  return e.call == call && e.enqueued_us != 0 ? &e : nullptr;
}

void FlightRecorder::started(uint64_t call, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(call)) {
    e->seq = seq;
    e->state = State::Started;
    e->started_us = now_us();
  }
}

void FlightRecorder::finished(uint64_t call, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(call)) {
    e->state = ok ? State::Completed : State::Failed;
    e->finished_us = now_us();
  }
}

std::string FlightRecorder::json(int rank, int size) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = fmt::format("{{\"rank\":{},\"size\":{},\"entries\":[", rank, size);
  uint64_t first = next_call_ > ring_.size() ? next_call_ - ring_.size() : 0;
  for (uint64_t c = first; c < next_call_; ++c) {
    const Entry& e = ring_[c % ring_.size()];
    out += fmt::format("{}\n{{\"call\":{},\"seq\":{},\"name\":\"{}\",\"bytes\":{},\"dtype\":\"{}\",\"state\":\"{}\","
                       "\"enqueued_us\":{},\"started_us\":{},\"finished_us\":{}}}",
                       c == first ? "" : ",", e.call, e.seq, e.name, e.bytes, dtype_name(e.dtype), state_name(e.state),
                       e.enqueued_us, e.started_us, e.finished_us);
  }
  return out + "]}\n";
}

std::string FlightRecorder::dump(int rank, int size, const std::string& suffix) const {
  const std::string dir = env::text("TANDEM_FLIGHT_DIR").value_or(".");
  std::string path = fmt::format("{}/tandem-flight-rank{}{}.json", dir, rank, suffix);
  std::string text = json(rank, size);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? path : "";
}

}  // namespace tandem::comm
