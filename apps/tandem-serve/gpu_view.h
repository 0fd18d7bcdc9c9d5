// The GPUs as tandem-serve shows them: runtime/monitor's figures as JSON (GET /gpus) and as
// DCGM-named Prometheus gauges (GET /metrics).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/monitor/gpu_monitor.h"
#include "runtime/monitor/prometheus.h"

namespace tandem::serve {

// One GPU: every figure, null where NVML could not give it, and "unavailable" saying why.
nlohmann::json gpu_json(const monitor::GpuStats& g);
// Every GPU this process sees; an empty array without NVML or GPUs.
nlohmann::json gpus_json();

}  // namespace tandem::serve
