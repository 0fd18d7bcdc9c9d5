// A timeline recorder for library users and tandem-train's --trace: named spans (a scope guard, or
// explicit start/end for work that outlives a scope, such as a bucket all-reduce), kept per process
// in memory and written as Chrome trace JSON (Perfetto and chrome://tracing open it). Off by default;
// off costs one relaxed atomic load per span.
//
//   trace::enable();                  // e.g. at start, after a barrier: trace::set_origin()
//   { trace::TraceSpan s("forward"); ... }
//   trace::flush("run.json");         // this process's events (pid: trace::set_pid)
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::trace {

struct Event {
  std::string name;
  double ts_us = 0, dur_us = 0;  // from the origin
  int tid = 0;                   // 0: the training thread's spans; 1: communication (overlaps them)
  int64_t arg = -1;              // e.g. the bucket index (-1: none)
};

namespace detail {
extern std::atomic<bool> g_enabled;
}

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
void enable(bool on = true);
// Timestamps count from here (each rank calls it right after a barrier: the clocks align to it).
void set_origin();
double now_us();  // microseconds since the origin
void set_pid(int pid);  // the track of this process in the JSON (the rank)
int pid();

// Records a finished span [start_us, end_us] (no-op when off).
void record(const std::string& name, double start_us, double end_us, int tid = 0, int64_t arg = -1);
// Moves the events out (the recorder is empty afterwards).
std::vector<Event> take_events();

// The events of `pid` as Chrome trace JSON objects ("X" complete events, and the process/thread
// name records), without the enclosing array: joined with commas into {"traceEvents": [...]}.
std::vector<std::string> chrome_events(const std::vector<Event>& events, int pid);
// Writes this process's recorded events (taken) as one Chrome trace JSON file.
void flush(const std::string& path);

// A span from construction to destruction, on the calling thread's track 0.
class TraceSpan {
 public:
  explicit TraceSpan(const char* name, int64_t arg = -1) : name_(name), arg_(arg) {
    if (enabled()) start_ = now_us();
  }
  ~TraceSpan() {
    if (start_ >= 0) record(name_, start_, now_us(), 0, arg_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  const char* name_;
  int64_t arg_;
  double start_ = -1;
};

}  // namespace tandem::trace
