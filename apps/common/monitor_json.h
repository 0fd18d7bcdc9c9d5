// The monitor's figures as JSON (nlohmann): GpuStats and HostStats with units in the key names and
// null for an unavailable figure. Used by /status of tandem-train and by tandem-serve's /gpus.
#pragma once
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/monitor/gpu_monitor.h"
#include "runtime/monitor/host_monitor.h"

namespace tandem::monitor {

// An unavailable figure (an empty optional) as null.
template <typename T>
nlohmann::json json_or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

// {"index":0,"nvml_index":2,"name":"...","uuid":"GPU-...","compute_capability":"9.0",
//  "memory_total_bytes":...,"memory_free_bytes":...,"memory_used_bytes":...,
//  "utilization_gpu_percent":..,"utilization_memory_percent":..,"temperature_c":..,"power_w":..,
//  "power_limit_w":..,"sm_clock_mhz":..,"ecc_uncorrected_volatile":..,"lost":false,"unavailable":""}
void to_json(nlohmann::json& j, const GpuStats& g);
void from_json(const nlohmann::json& j, GpuStats& g);
// {"hostname","cpu_model","logical_cores","load_average":[1,5,15],"rss_bytes","peak_rss_bytes",
//  "cpu_user_seconds","cpu_system_seconds"}
void to_json(nlohmann::json& j, const HostStats& h);

}  // namespace tandem::monitor
