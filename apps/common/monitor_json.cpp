// JSON of the monitor's figures: an empty optional is null, and null reads back as empty.
#include "apps/common/monitor_json.h"

namespace tandem::monitor {

namespace {

template <typename T>
void read_opt(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) v.reset();
  else v = it->get<T>();
}

}  // namespace

void to_json(nlohmann::json& j, const GpuStats& g) {
  j = nlohmann::json{
      {"index", g.index},
      {"nvml_index", g.nvml_index},
      {"name", g.name},
      {"uuid", g.uuid},
      {"compute_capability",
       g.cc_major && g.cc_minor ? nlohmann::json(std::to_string(*g.cc_major) + "." + std::to_string(*g.cc_minor))
                                : nlohmann::json()},
      {"memory_total_bytes", json_or_null(g.memory_total)},
      {"memory_free_bytes", json_or_null(g.memory_free)},
      {"memory_used_bytes", json_or_null(g.memory_used)},
      {"utilization_gpu_percent", json_or_null(g.util_gpu)},
      {"utilization_memory_percent", json_or_null(g.util_memory)},
      {"temperature_c", json_or_null(g.temperature_c)},
      {"power_w", json_or_null(g.power_w)},
      {"power_limit_w", json_or_null(g.power_limit_w)},
      {"sm_clock_mhz", json_or_null(g.sm_clock_mhz)},
      {"ecc_uncorrected_volatile", json_or_null(g.ecc_uncorrected_volatile)},
      {"lost", g.lost},
      {"unavailable", g.unavailable},
  };
}

void from_json(const nlohmann::json& j, GpuStats& g) {
  g = GpuStats{};
  g.index = j.value("index", -1);
  g.nvml_index = j.value("nvml_index", -1);
  g.name = j.value("name", "");
  g.uuid = j.value("uuid", "");
  if (auto cc = j.find("compute_capability"); cc != j.end() && cc->is_string()) {
    const std::string s = cc->get<std::string>();
    if (auto dot = s.find('.'); dot != std::string::npos) {
      g.cc_major = std::stoi(s.substr(0, dot));
      g.cc_minor = std::stoi(s.substr(dot + 1));
    }
  }
  read_opt(j, "memory_total_bytes", g.memory_total);
  read_opt(j, "memory_free_bytes", g.memory_free);
  read_opt(j, "memory_used_bytes", g.memory_used);
  read_opt(j, "utilization_gpu_percent", g.util_gpu);
  read_opt(j, "utilization_memory_percent", g.util_memory);
  read_opt(j, "temperature_c", g.temperature_c);
  read_opt(j, "power_w", g.power_w);
  read_opt(j, "power_limit_w", g.power_limit_w);
  read_opt(j, "sm_clock_mhz", g.sm_clock_mhz);
  read_opt(j, "ecc_uncorrected_volatile", g.ecc_uncorrected_volatile);
  g.lost = j.value("lost", false);
  g.unavailable = j.value("unavailable", "");
}

void to_json(nlohmann::json& j, const HostStats& h) {
  j = nlohmann::json{{"hostname", h.hostname},
                     {"cpu_model", h.cpu_model},
                     {"logical_cores", h.logical_cores},
                     {"load_average", h.load1 ? nlohmann::json{*h.load1, *h.load5, *h.load15} : nlohmann::json()},
                     {"rss_bytes", json_or_null(h.rss_bytes)},
                     {"peak_rss_bytes", json_or_null(h.peak_rss_bytes)},
                     {"cpu_user_seconds", json_or_null(h.cpu_user_s)},
                     {"cpu_system_seconds", json_or_null(h.cpu_system_s)}};
}

}  // namespace tandem::monitor
