// JSON-lines metrics and peak RSS.
#include "apps/common/metrics.h"

#include <cstring>

#include "runtime/error.h"

namespace tandem::app {

MetricsWriter::MetricsWriter(const std::string& path, bool enabled) : path_(path) {
  if (path.empty() || !enabled) return;
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_) TANDEM_FAIL(IO, "{}: cannot open the metrics file for writing ({})", path, std::strerror(errno));
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) TANDEM_FAIL(IO, "{}: writing metrics failed", path_);
}

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  123456 kB"
  }
  return 0.0;
}

}  // namespace tandem::app
