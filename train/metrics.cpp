// JSON-lines metrics and peak RSS.
#include "train/metrics.h"

#include <cstring>

#include "runtime/error.h"
#include "runtime/monitor/host_monitor.h"

namespace tandem::train {

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
  const auto peak = monitor::query_host().peak_rss_bytes;  // VmHWM of /proc/self/status
  return peak ? static_cast<double>(*peak) / (1024.0 * 1024.0) : 0.0;
}

}  // namespace tandem::train
