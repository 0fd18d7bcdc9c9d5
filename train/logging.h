// Console logging of the apps, on spdlog: levels (--log-level), a "[rank R] " prefix when several
// processes train, info from rank 0 only, warnings and debug lines from every rank (warnings and
// errors on stderr), and result lines that rank 0 always prints. A live progress bar (progress.h)
// shares the console: a log line first clears a bar drawn on the terminal.
#pragma once
#include <string>

#include <fmt/format.h>

#include "runtime/enum_names.h"

namespace tandem::train {

namespace logging {

enum class Level { trace, debug, info, warn, error, off };

// Its words ("trace" ... "off") are EnumNames<Level>'s, below: enum_value<Level>(word).
// Sets the process-wide level and the rank prefix (world_size > 1: "[rank R] "). Call again once the
// world is known; before that, lines have no prefix and the level is info.
void configure(Level level, int rank, int world_size);
Level level();
bool enabled(Level level);
// One line at `level` (result lines: Level::off, printed whatever the level). Thread-safe.
void emit(Level level, const std::string& line);

// The console's progress line (progress.h): drawn with \r and no newline. Log lines written while
// one is showing clear it first, and the next draw puts it back.
void draw_status_line(const std::string& line);
void end_status_line();  // ends a drawn line with a newline (the bar stays on screen)

}  // namespace logging

// A rank's logger: info lines from rank 0 (unless quiet), warn and debug lines from every rank,
// result lines (the run's outcome) from rank 0 always.
class Logger {
 public:
  explicit Logger(int rank = 0, bool quiet = false) : rank_(rank), quiet_(quiet) {}
  template <class... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) const {
    if (rank_ == 0 && !quiet_ && logging::enabled(logging::Level::info))
      logging::emit(logging::Level::info, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void result(fmt::format_string<Args...> f, Args&&... args) const {
    if (rank_ == 0) logging::emit(logging::Level::off, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) const {
    if (logging::enabled(logging::Level::warn))
      logging::emit(logging::Level::warn, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void debug(fmt::format_string<Args...> f, Args&&... args) const {
    if (logging::enabled(logging::Level::debug))
      logging::emit(logging::Level::debug, fmt::format(f, std::forward<Args>(args)...));
  }
  int rank() const { return rank_; }
  bool quiet() const { return quiet_; }

 private:
  int rank_;
  bool quiet_;
};

// The environment's TANDEM_* variables in the run log: a warning (rank 0) for each that tandem does
// not read (a typo: "did you mean ...?"), and at debug level the settings not at their defaults.
void log_environment(const Logger& log);

}  // namespace tandem::train

namespace tandem {
template <>
struct EnumNames<train::logging::Level> {
  using L = train::logging::Level;
  static constexpr std::pair<L, const char*> words[] = {{L::trace, "trace"}, {L::debug, "debug"}, {L::info, "info"},
                                                        {L::warn, "warn"},   {L::error, "error"}, {L::off, "off"}};
};
}  // namespace tandem
