// The apps' console on spdlog: one logger over a sink that routes by level (stdout: debug, info,
// results; stderr: warnings, errors) and shares the terminal with the progress line.
#include "train/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "runtime/env_settings.h"
#include "runtime/error.h"

namespace tandem::train::logging {

namespace {

// Writes each formatted line to stdout or stderr by level; clears a showing progress line first.
class ConsoleSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void status(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fputs("\r", stdout);
    std::fputs(line.c_str(), stdout);
    // Pad over the rest of a longer previous line.
    for (size_t i = line.size(); i < status_width_; ++i) std::fputc(' ', stdout);
    std::fflush(stdout);
    status_width_ = line.size();
  }
  void end_status() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_width_ == 0) return;
    std::fputc('\n', stdout);
    std::fflush(stdout);
    status_width_ = 0;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    if (status_width_ > 0) {  // wipe the bar; the next draw puts it back below this line
      std::fprintf(stdout, "\r%*s\r", static_cast<int>(status_width_), "");
      std::fflush(stdout);
      status_width_ = 0;
    }
    std::FILE* out = msg.level >= spdlog::level::warn && msg.level != spdlog::level::critical ? stderr : stdout;
    std::fwrite(buf.data(), 1, buf.size(), out);
    std::fflush(out);
  }
  void flush_() override {
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  size_t status_width_ = 0;
};

struct State {
  std::shared_ptr<ConsoleSink> sink = std::make_shared<ConsoleSink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("tandem", sink);
  std::atomic<int> level{static_cast<int>(Level::info)};
  State() {
    logger->set_level(spdlog::level::trace);  // filtering is ours (Level), so results pass at any level
    configure_pattern(0, 1);
  }
  void configure_pattern(int rank, int world_size) {
    // %v: the message; results go out as level critical and carry no tag; warnings say so.
    const std::string prefix = world_size > 1 ? fmt::format("[rank {}] ", rank) : std::string();
    sink->set_pattern(prefix + "%v");
  }
};

State& state() {
  static State s;
  return s;
}

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::off: break;
  }
  return spdlog::level::critical;  // result lines
}

}  // namespace

void configure(Level level, int rank, int world_size) {
  state().level = static_cast<int>(level);
  state().configure_pattern(rank, world_size);
}

Level level() { return static_cast<Level>(state().level.load()); }

bool enabled(Level l) { return l != Level::off && static_cast<int>(l) >= state().level.load(); }

void emit(Level l, const std::string& line) {
  const char* tag = l == Level::warn ? "warning: " : l == Level::error ? "error: " : "";
  state().logger->log(to_spdlog(l), "{}{}", tag, line);
}

void draw_status_line(const std::string& line) { state().sink->status(line); }

void end_status_line() { state().sink->end_status(); }

}  // namespace tandem::train::logging

namespace tandem::train {

void log_environment(const Logger& log) {
  if (log.rank() == 0)
    for (const std::string& line : env::unknown_variables()) log.warn("{}", line);
  std::string set;
  for (const auto& [name, value] : env::non_default()) set += fmt::format("{}{}={}", set.empty() ? "" : " ", name, value);
  log.debug("environment: {}", set.empty() ? "every TANDEM_* setting at its default" : set);
}

}  // namespace tandem::train
