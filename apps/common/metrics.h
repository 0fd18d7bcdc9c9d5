// Run reporting: JSON-lines metrics, rank-0 console lines, and the process's peak RSS.
#pragma once
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::app {

// Appends one JSON object per line to a file; does nothing where disabled (no path, or not rank 0).
class MetricsWriter {
 public:
  MetricsWriter() = default;
  MetricsWriter(const std::string& path, bool enabled);  // truncates the file; IOError if unwritable
  void write(const nlohmann::json& record);              // one line, flushed
  bool enabled() const { return out_.is_open(); }

 private:
  std::ofstream out_;
  std::string path_;
};

// Console output from rank 0 only.
class Logger {
 public:
  explicit Logger(int rank = 0, bool quiet = false) : rank_(rank), quiet_(quiet) {}
  template <class... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) const {
    if (rank_ == 0 && !quiet_) fmt::print("{}\n", fmt::format(f, std::forward<Args>(args)...)), std::fflush(stdout);
  }
  // Always printed by rank 0 (the final result).
  template <class... Args>
  void result(fmt::format_string<Args...> f, Args&&... args) const {
    if (rank_ == 0) fmt::print("{}\n", fmt::format(f, std::forward<Args>(args)...)), std::fflush(stdout);
  }

 private:
  int rank_;
  bool quiet_;
};

// Peak resident set size of this process in MB (VmHWM in /proc/self/status); 0 where unavailable.
double peak_rss_mb();

}  // namespace tandem::app
