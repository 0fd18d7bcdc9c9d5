// Fault injection for the reliability tests: TANDEM_FAULT names one point in the code where the
// process kills itself (or corrupts a batch), at a moment a signal from outside cannot hit precisely.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace tandem::fault {

// TANDEM_FAULT="name[:stage][:key=value]...", e.g. "ckpt_write:after_model:hit=2" or
// "nan_batch:step=5:rank=1". Parsed once, on first use; unset or empty: no fault anywhere.
struct Spec {
  std::string name, stage;
  std::map<std::string, std::string> values;
  int64_t value(const std::string& key, int64_t fallback) const;
};

// The parsed TANDEM_FAULT, or nullptr when it is unset (the common case: one load and a branch).
const Spec* spec();

// True when TANDEM_FAULT names `name` (and `stage`, where the spec gives one).
bool armed(const char* name, const char* stage = nullptr);

// Checkpoint-writing stages and the like: when TANDEM_FAULT is "name:stage" and this is its
// hit=N-th arrival here (default the first), prints a line to stderr and SIGKILLs this process.
void kill_point(const char* name, const char* stage);

// Sends `signal` to this process (SIGKILL, SIGSTOP), after a stderr line with the wall-clock time
// in ms ("tandem fault: <what> at <ms>"), which the tests use to time the recovery.
void raise_now(int signal, const std::string& what);

}  // namespace tandem::fault
