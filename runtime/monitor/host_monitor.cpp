// query_host: /proc/cpuinfo, /proc/loadavg, /proc/self/status and /proc/self/stat, read as text.
#include "runtime/monitor/host_monitor.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tandem::monitor {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t b = colon + 1;
    while (b < line.size() && line[b] == ' ') ++b;
    return line.substr(b);
  }
  return "";
}

// "VmRSS:	  123456 kB" -> bytes.
std::optional<uint64_t> status_kb(const std::string& text, const char* key) {
  auto pos = text.find(key);
  if (pos == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(pos + std::char_traits<char>::length(key)));
  uint64_t kb = 0;
  if (!(in >> kb)) return std::nullopt;
  return kb * 1024;
}

}  // namespace

HostStats query_host() {
  HostStats h;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  // Read once per process: neither changes while it runs.
  static const std::string model = cpu_model();
  h.cpu_model = model;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  h.logical_cores = cores > 0 ? static_cast<int>(cores) : 0;

  if (std::ifstream in("/proc/loadavg"); in) {
    double l1, l5, l15;
    if (in >> l1 >> l5 >> l15) {
      h.load1 = l1;
      h.load5 = l5;
      h.load15 = l15;
    }
  }
  if (std::ifstream in("/proc/self/status"); in) {
    std::stringstream text;
    text << in.rdbuf();
    h.rss_bytes = status_kb(text.str(), "VmRSS:");
    h.peak_rss_bytes = status_kb(text.str(), "VmHWM:");
  }
  // /proc/self/stat: "pid (comm) state ..." where comm may hold spaces; utime and stime are the
  // 14th and 15th fields, in clock ticks.
  if (std::ifstream in("/proc/self/stat"); in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(text.substr(close + 1));
      std::string field;
      unsigned long long utime = 0, stime = 0;
      // After ")" come fields 3 (state) .. 13; utime is field 14.
      int i = 3;
      for (; i <= 13 && (rest >> field); ++i) {
      }
      const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
      if (i == 14 && (rest >> utime >> stime) && tick > 0) {
        h.cpu_user_s = utime / tick;
        h.cpu_system_s = stime / tick;
      }
    }
  }
  return h;
}

}  // namespace tandem::monitor
