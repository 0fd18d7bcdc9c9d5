// The host's figures from /proc (Linux): CPU model and cores, load average, this process's resident
// memory and CPU time. Like the GPU monitor it never throws: a figure /proc cannot give is empty.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tandem::monitor {

struct HostStats {
  std::string hostname;
  std::string cpu_model;                     // /proc/cpuinfo "model name" (empty when unavailable)
  int logical_cores = 0;                     // online CPUs (sysconf)
  std::optional<double> load1, load5, load15;  // /proc/loadavg
  std::optional<uint64_t> rss_bytes, peak_rss_bytes;  // this process: /proc/self/status VmRSS, VmHWM
  std::optional<double> cpu_user_s, cpu_system_s;     // this process, all threads: /proc/self/stat
};

// Reads the figures now (a few small /proc reads, ~20 us).
HostStats query_host();

}  // namespace tandem::monitor
