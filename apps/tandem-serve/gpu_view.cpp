// GPU figures as JSON.
#include "apps/tandem-serve/gpu_view.h"

namespace tandem::serve {

namespace {

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

nlohmann::json gpu_json(const monitor::GpuStats& g) {
  nlohmann::json cc;
  if (g.cc_major && g.cc_minor) cc = std::to_string(*g.cc_major) + "." + std::to_string(*g.cc_minor);
  return {{"index", g.index},
          {"nvml_index", g.nvml_index},
          {"name", g.name},
          {"uuid", g.uuid},
          {"compute_capability", cc},
          {"memory_total_bytes", opt(g.memory_total)},
          {"memory_free_bytes", opt(g.memory_free)},
          {"memory_used_bytes", opt(g.memory_used)},
          {"utilization_gpu_pct", opt(g.util_gpu)},
          {"utilization_memory_pct", opt(g.util_memory)},
          {"temperature_c", opt(g.temperature_c)},
          {"power_w", opt(g.power_w)},
          {"power_limit_w", opt(g.power_limit_w)},
          {"sm_clock_mhz", opt(g.sm_clock_mhz)},
          {"ecc_uncorrected_volatile", opt(g.ecc_uncorrected_volatile)},
          {"lost", g.lost},
          {"unavailable", g.unavailable}};
}

nlohmann::json gpus_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : monitor::query_gpus()) out.push_back(gpu_json(g));
  return out;
}

}  // namespace tandem::serve
