// FlightRecorder: a mutex-guarded ring of the last collectives, and its JSON dump.
#include "comm/flight_recorder.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace tandem::comm {

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

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

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

std::string FlightRecorder::dump(int rank, int size) const {
  const char* dir = std::getenv("TANDEM_FLIGHT_DIR");
  std::string path = fmt::format("{}/tandem-flight-rank{}.json", dir && *dir ? dir : ".", rank);
  std::string text = json(rank, size);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? path : "";
}

}  // namespace tandem::comm
