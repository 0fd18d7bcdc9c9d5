// FlightRecorder: each communicator's last N collectives (name, sequence number, bytes, dtype,
// state, timestamps), dumped to a per-rank JSON file when a deadline error ends the communicator,
// so that a hang can be read after the fact (scripts/flight-report lines the ranks up).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace tandem::comm {

class FlightRecorder {
 public:
  enum class State { Enqueued, Started, Completed, Failed };
  explicit FlightRecorder(size_t capacity = 256);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Once the communicator knows its rank: from now on a SIGUSR1 to the process dumps this recorder
  // too (the handler only writes a byte to a pipe; a thread dumps every identified recorder). The
  // handler is installed on the first call, and only where SIGUSR1 still has its default action
  // (a host program's own handler is left alone).
  void identify(int rank, int size);

  // The caller thread, at issue: returns the entry's call number (0, 1, ...: the same on every
  // rank issuing the same collectives).
  uint64_t enqueued(const char* name, int64_t count, DType dtype);
  // The executor thread: the collective begins as sequence number `seq` / ends.
  void started(uint64_t call, uint64_t seq);
  void finished(uint64_t call, bool ok);

  // {"rank":..,"size":..,"entries":[{"call":..,"seq":..,"name":..,"bytes":..,"dtype":..,"state":..,
  //  "enqueued_us":..,"started_us":..,"finished_us":..}, ...]} oldest first; times in us since the epoch.
  std::string json(int rank, int size) const;
  // Writes json() to $TANDEM_FLIGHT_DIR (default: the working directory)/tandem-flight-rank<R>.json
  // and returns the path, or "" when it cannot be written (a dump must never hide the real error).
  std::string dump(int rank, int size, const std::string& suffix = "") const;

 private:
  struct Entry {
    uint64_t call = 0, seq = 0;
    const char* name = "";
    int64_t bytes = 0;
    DType dtype = DType::f32;
    State state = State::Enqueued;
    int64_t enqueued_us = 0, started_us = 0, finished_us = 0;
  };
  Entry* find(uint64_t call);  // null once overwritten

  mutable std::mutex mu_;  // a few hundred ns per collective: cheap next to one
  std::vector<Entry> ring_;
  uint64_t next_call_ = 0;
  int rank_ = -1, size_ = 0;  // set by identify (under the registry's lock)
  friend void dump_identified_recorders();
};

}  // namespace tandem::comm
