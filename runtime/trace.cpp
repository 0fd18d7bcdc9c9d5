// The trace recorder: a mutex-guarded event list (spans are few per step), the origin, the JSON.
#include "runtime/trace.h"

#include <chrono>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

#include "runtime/error.h"

namespace tandem::trace {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::atomic<double> origin{0};
  int pid = 0;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

double clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

void enable(bool on) {
  if (on && recorder().origin.load() == 0) set_origin();
  detail::g_enabled.store(on, std::memory_order_relaxed);
}

void set_origin() { recorder().origin = clock_us(); }

double now_us() { return clock_us() - recorder().origin.load(std::memory_order_relaxed); }

void set_pid(int pid) { recorder().pid = pid; }
int pid() { return recorder().pid; }

void record(const std::string& name, double start_us, double end_us, int tid, int64_t arg) {
  if (!enabled()) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.events.push_back(Event{name, start_us, end_us - start_us, tid, arg});
}

std::vector<Event> take_events() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  return std::move(r.events);
}

std::vector<std::string> chrome_events(const std::vector<Event>& events, int pid) {
  std::vector<std::string> out;
  out.push_back(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})", pid, pid));
  out.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":0,"args":{{"name":"compute"}}}})", pid));
  out.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":1,"args":{{"name":"communication"}}}})", pid));
  for (const Event& e : events) {
    std::string args = e.arg >= 0 ? fmt::format(R"(,"args":{{"bucket":{}}})", e.arg) : std::string();
    out.push_back(fmt::format(R"({{"name":"{}","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":{},"tid":{}{}}})",
                              escape(e.name), e.ts_us, e.dur_us, pid, e.tid, args));
  }
  return out;
}

void flush(const std::string& path) {
  const std::vector<std::string> lines = chrome_events(take_events(), pid());
  std::ofstream out(path, std::ios::trunc);
  TANDEM_CHECK_KIND(IO, out.good(), "trace: cannot write '{}'", path);
  out << "{\"traceEvents\":[\n";
  for (size_t i = 0; i < lines.size(); ++i) out << lines[i] << (i + 1 < lines.size() ? ",\n" : "\n");
  out << "],\"displayTimeUnit\":\"ms\"}\n";
  TANDEM_CHECK_KIND(IO, out.good(), "trace: writing '{}' failed", path);
}

}  // namespace tandem::trace
