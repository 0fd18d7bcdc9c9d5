// The environment variables tandem reads (TANDEM_*): one table (env_settings.cpp) declares each
// once with its kind, values, default and doc; one parser reads each once, on first use.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::env {

enum class Kind {
  Flag,    // on/off: 1, on, true, yes / 0, off, false, no
  Choice,  // one of `values`, the first the default
  Size,    // a size as memory::parse_size reads it ("512MiB", "0")
  Number,  // a positive number
  Path,    // a file or folder
  Text,    // text with a parser of its own where it is used (TANDEM_FAULT's spec)
};
const char* kind_name(Kind kind);  // "on/off", "choice", "size", ...

enum class Use {
  General,  // a setting for users
  GpuAb,    // keeps an old GPU path for side-by-side runs until a GPU run decides between them
  Testing,  // read by the tests, the emulator or a script
};

struct Variable {
  const char* name;                 // "TANDEM_COMM_SHM"
  Kind kind;
  std::vector<const char*> values;  // Choice: the accepted values, the default first; else empty
  const char* fallback;             // the default as the docs print it ("on", "1GiB", "" for none)
  const char* doc;                  // one line
  Use use;
};

// Every variable, in the table's order (the docs' order).
const std::vector<Variable>& variables();

// Each read below takes the variable's value from the environment at its first use in the process
// and keeps it; unset or empty is the default. A value its kind does not accept is a ValueError
// naming the variable, the value and what it accepts ("did you mean ...?"), at every read. An
// undeclared name is an internal error.
bool flag(const char* name);
int choice(const char* name);                       // the index of the value in `values`
std::optional<size_t> size(const char* name);       // nullopt when unset
std::optional<double> number(const char* name);     // nullopt when unset
std::optional<std::string> text(const char* name);  // Path, Text: nullopt when unset
bool is_set(const char* name);                      // set and not empty (a bad value too)

// A Choice or Flag read on a hot path: the name looked up once, then each index() is one atomic load.
class Switch {
 public:
  explicit Switch(const char* name);
  int index() const;  // Choice: the value's index; Flag: 1 on, 0 off; throws as above
  // The default's index for a bad value, for callers that must not throw (in a parallel region):
  // check() is then the value's error, which the programs call before any kernel.
  int index_or_default() const noexcept;

 private:
  size_t slot_;
};

// Reads every declared variable now; throws one ValueError listing each bad value. tandem-train
// and the C API's model creation call it before any kernel.
void check();

// NAME=value of each variable set to other than its default, in the table's order (for the run log
// and the done record). A bad value is listed as it is.
std::vector<std::pair<std::string, std::string>> non_default();

// One line for each TANDEM_* variable in the environment that tandem does not read: a typo
// ("did you mean TANDEM_COMM_SHM?") or a retired switch (what replaced it).
std::vector<std::string> unknown_variables();

// docs/environment.md's table of the variables (a test keeps the doc's copy equal to it).
std::string markdown_table();

// For tests and tools in one process: sets (value) or unsets (nullptr) the variable and reads it
// again; the destructor restores both. Not for use while other threads read the variable.
class ScopedValue {
 public:
  ScopedValue(const char* name, const char* value);
  ~ScopedValue();
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace tandem::env
