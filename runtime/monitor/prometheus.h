// The Prometheus text exposition format 0.0.4 (what /metrics serves: Content-Type
// "text/plain; version=0.0.4"), and the GPU gauges named as NVIDIA's DCGM exporter names them, so
// existing Grafana dashboards read tandem's endpoints unchanged.
//
//   PrometheusWriter w;
//   w.family("tandem_train_steps_total", "counter", "Optimizer steps taken");
//   w.sample("tandem_train_steps_total", {}, 42);
//   write_gpu_metrics(w, snapshot.gpus, snapshot.host.hostname);
//   std::string body = w.str();
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "runtime/monitor/gpu_monitor.h"

namespace tandem::monitor {

using Labels = std::vector<std::pair<std::string, std::string>>;

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

class PrometheusWriter {
 public:
  // "# HELP name help" and "# TYPE name type" (type: counter, gauge, untyped). Counter names end in
  // _total; values are in base units (bytes, seconds) unless the name says otherwise (DCGM's MiB).
  // A family is written once; its samples must follow it. Throws ValueError on a bad name or type.
  void family(const std::string& name, const std::string& type, const std::string& help);
  // `name{label="value",...} value`; label values escaped (\\, \", \n); NaN and infinities as
  // Prometheus spells them.
  void sample(const std::string& name, const Labels& labels, double value);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  std::vector<std::string> families_;
};

// "a\"b" for a"b: backslash, double quote and newline escaped as the format requires.
std::string escape_label_value(const std::string& value);

// The DCGM-named gauges of `gpus` (DCGM_FI_DEV_GPU_UTIL, _MEM_COPY_UTIL, _FB_USED, _FB_FREE (MiB),
// _GPU_TEMP (C), _POWER_USAGE (W), _POWER_MGMT_LIMIT (W), _SM_CLOCK (MHz), _ECC_DBE_VOL_TOTAL)
// with DCGM's labels gpu (NVML index), UUID, device (nvidiaN), modelName, Hostname, plus
// cuda_index. Every family's # HELP and # TYPE lines are written even without a GPU; an unavailable
// figure has no sample. extra_labels are appended to every sample (e.g. rank).
void write_gpu_metrics(PrometheusWriter& w, const std::vector<GpuStats>& gpus, const std::string& hostname,
                       const Labels& extra_labels = {});

// The same families over several sources (e.g. one per rank of a job): each family once, then
// every source's samples.
struct GpuSource {
  std::vector<GpuStats> gpus;
  std::string hostname;
  Labels extra_labels;
};
void write_gpu_metrics(PrometheusWriter& w, const std::vector<GpuSource>& sources);

}  // namespace tandem::monitor
