// The text format writer and the DCGM-named GPU families.
#include "runtime/monitor/prometheus.h"

#include <cctype>
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "runtime/error.h"

namespace tandem::monitor {

namespace {

bool valid_name(const std::string& name, bool label) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool ok = std::isalpha(c) || c == '_' || (!label && c == ':') || (i > 0 && std::isdigit(c));
    if (!ok) return false;
  }
  return true;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);  // integers exactly
  return fmt::format("{}", v);  // shortest round-trip form
}

// HELP text escapes backslash and newline only.
std::string escape_help(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PrometheusWriter::family(const std::string& name, const std::string& type, const std::string& help) {
  TANDEM_CHECK(valid_name(name, false), "Prometheus: invalid metric name '{}'", name);
  TANDEM_CHECK(type == "counter" || type == "gauge" || type == "untyped", "Prometheus: type '{}' of {} is not "
               "counter, gauge or untyped", type, name);
  for (const auto& f : families_) TANDEM_CHECK(f != name, "Prometheus: family {} written twice", name);
  families_.push_back(name);
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help), name, type);
}

void PrometheusWriter::sample(const std::string& name, const Labels& labels, double value) {
  TANDEM_CHECK(valid_name(name, false), "Prometheus: invalid metric name '{}'", name);
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      TANDEM_CHECK(valid_name(labels[i].first, true) && labels[i].first.rfind("__", 0) != 0,
                   "Prometheus: invalid label name '{}'", labels[i].first);
      if (i) out_ += ',';
      out_ += fmt::format("{}=\"{}\"", labels[i].first, escape_label_value(labels[i].second));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

namespace {

struct GpuFamily {
  const char* name;
  const char* type;
  const char* help;
  std::function<std::optional<double>(const GpuStats&)> value;
};

constexpr double kMiB = 1024.0 * 1024.0;

const std::vector<GpuFamily>& gpu_families() {
  static const std::vector<GpuFamily> families = {
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
       [](const GpuStats& g) -> std::optional<double> { return g.util_gpu; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       [](const GpuStats& g) -> std::optional<double> { return g.util_memory; }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       [](const GpuStats& g) -> std::optional<double> {
         if (!g.memory_used) return std::nullopt;
         return std::floor(*g.memory_used / kMiB);
       }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
       [](const GpuStats& g) -> std::optional<double> {
         if (!g.memory_free) return std::nullopt;
         return std::floor(*g.memory_free / kMiB);
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
       [](const GpuStats& g) -> std::optional<double> { return g.temperature_c; }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
       [](const GpuStats& g) { return g.power_w; }},
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).",
       [](const GpuStats& g) { return g.power_limit_w; }},
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
       [](const GpuStats& g) -> std::optional<double> { return g.sm_clock_mhz; }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
       [](const GpuStats& g) -> std::optional<double> {
         if (!g.ecc_uncorrected_volatile) return std::nullopt;
         return static_cast<double>(*g.ecc_uncorrected_volatile);
       }},
  };
  return families;
}

Labels gpu_labels(const GpuStats& g, const std::string& hostname, const Labels& extra) {
  Labels l = {{"gpu", std::to_string(g.nvml_index)},
              {"UUID", g.uuid},
              {"device", fmt::format("nvidia{}", g.nvml_index)},
              {"modelName", g.name},
              {"Hostname", hostname},
              {"cuda_index", std::to_string(g.index)}};
  l.insert(l.end(), extra.begin(), extra.end());
  return l;
}

}  // namespace

void write_gpu_metrics(PrometheusWriter& w, const std::vector<GpuSource>& sources) {
  for (const GpuFamily& f : gpu_families()) {
    w.family(f.name, f.type, f.help);
    for (const GpuSource& s : sources)
      for (const GpuStats& g : s.gpus)
        if (auto v = f.value(g)) w.sample(f.name, gpu_labels(g, s.hostname, s.extra_labels), *v);
  }
}

void write_gpu_metrics(PrometheusWriter& w, const std::vector<GpuStats>& gpus, const std::string& hostname,
                       const Labels& extra_labels) {
  write_gpu_metrics(w, {GpuSource{gpus, hostname, extra_labels}});
}

}  // namespace tandem::monitor
