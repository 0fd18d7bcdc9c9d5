// Run reporting: JSON-lines metrics and the process's peak RSS (console lines: logging.h).
#pragma once
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/logging.h"  // Logger

namespace tandem::train {

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

// Peak resident set size of this process in MB (VmHWM in /proc/self/status); 0 where unavailable.
double peak_rss_mb();

}  // namespace tandem::train
