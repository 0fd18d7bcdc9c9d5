// query_gpus: NVML's figures for the GPUs CUDA_VISIBLE_DEVICES leaves this process. Every NVML call
// goes through NVML_TRY, which turns a failure into an unavailable figure carrying the call, its
// file:line and NVML's message; nothing here throws.
#include "runtime/monitor/gpu_monitor.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runtime/monitor/nvml_api.h"

namespace tandem::monitor {

namespace {

// One GPU's queries: each failed call adds to `stats.unavailable`; a lost GPU stops the rest.
struct Query {
  const nvml::Api& api;
  nvml::Device device;
  GpuStats& stats;

  bool check(nvml::Return r, const char* figure, const char* call, int line) {
    if (r == nvml::kSuccess) return true;
    if (r == nvml::kErrorGpuIsLost) stats.lost = true;
    if (!stats.unavailable.empty()) stats.unavailable += "; ";
    // The error reporter's shape ("file:line: call failed: message"), as an unavailable figure.
    stats.unavailable += fmt::format("{}: runtime/monitor/gpu_monitor.cpp:{}: {} failed: {}", figure, line, call,
                                     nvml::error_string(r));
    return false;
  }
};

// NVML_TRY(query, "figure", nvmlName, call on the Api table): false (and the figure unavailable) on failure.
#define NVML_TRY(q, figure, name, call) (!(q).stats.lost && (q).check((q).api.call, figure, #name, __LINE__))

void query_one(const nvml::Api& api, nvml::Device device, GpuStats& s) {
  Query q{api, device, s};
  char text[nvml::kNameBufferSize] = {};
  if (NVML_TRY(q, "name", nvmlDeviceGetName, device_get_name(device, text, sizeof text))) s.name = text;
  char uuid[nvml::kUuidBufferSize] = {};
  if (NVML_TRY(q, "uuid", nvmlDeviceGetUUID, device_get_uuid(device, uuid, sizeof uuid))) s.uuid = uuid;
  int major = 0, minor = 0;
  if (NVML_TRY(q, "compute capability", nvmlDeviceGetCudaComputeCapability,
               device_get_cuda_compute_capability(device, &major, &minor))) {
    s.cc_major = major;
    s.cc_minor = minor;
  }
  nvml::Memory mem{};
  if (NVML_TRY(q, "memory", nvmlDeviceGetMemoryInfo, device_get_memory_info(device, &mem))) {
    s.memory_total = mem.total;
    s.memory_free = mem.free;
    s.memory_used = mem.used;
  }
  nvml::Utilization util{};
  if (NVML_TRY(q, "utilisation", nvmlDeviceGetUtilizationRates, device_get_utilization_rates(device, &util))) {
    s.util_gpu = util.gpu;
    s.util_memory = util.memory;
  }
  unsigned value = 0;
  if (NVML_TRY(q, "temperature", nvmlDeviceGetTemperature,
               device_get_temperature(device, nvml::kTemperatureGpu, &value)))
    s.temperature_c = value;
  if (NVML_TRY(q, "power", nvmlDeviceGetPowerUsage, device_get_power_usage(device, &value)))
    s.power_w = value / 1000.0;  // milliwatts
  if (NVML_TRY(q, "power limit", nvmlDeviceGetEnforcedPowerLimit, device_get_enforced_power_limit(device, &value)))
    s.power_limit_w = value / 1000.0;
  if (NVML_TRY(q, "sm clock", nvmlDeviceGetClockInfo, device_get_clock_info(device, nvml::kClockSm, &value)))
    s.sm_clock_mhz = value;
  unsigned long long ecc = 0;
  if (NVML_TRY(q, "ecc", nvmlDeviceGetTotalEccErrors,
               device_get_total_ecc_errors(device, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, &ecc)))
    s.ecc_uncorrected_volatile = ecc;
  if (s.lost) {  // figures read before NVML noticed are not to be trusted either
    const int index = s.index, nvml_index = s.nvml_index;
    std::string why = std::move(s.unavailable);
    s = GpuStats{};
    s.index = index;
    s.nvml_index = nvml_index;
    s.lost = true;
    s.unavailable = std::move(why);
  }
}

// Every GPU NVML numbers, with its handle and UUID (empty where NVML cannot give one).
struct NodeGpus {
  std::vector<nvml::Device> handles;
  std::vector<std::string> uuids;
};

bool list_node_gpus(const nvml::Api& api, NodeGpus& node, std::string& reason) {
  unsigned count = 0;
  if (nvml::Return r = api.device_get_count_v2(&count); r != nvml::kSuccess) {
    reason = fmt::format("nvmlDeviceGetCount_v2 failed: {}", nvml::error_string(r));
    return false;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device h = nullptr;
    char uuid[nvml::kUuidBufferSize] = {};
    if (api.device_get_handle_by_index_v2(i, &h) != nvml::kSuccess) h = nullptr;
    if (h && api.device_get_uuid(h, uuid, sizeof uuid) != nvml::kSuccess) uuid[0] = '\0';
    node.handles.push_back(h);
    node.uuids.emplace_back(uuid);
  }
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

bool starts_with_nocase(const std::string& s, const std::string& prefix) {
  if (prefix.size() > s.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// One entry of CUDA_VISIBLE_DEVICES as an NVML index, or -1 where it ends the list.
int resolve_entry(const std::string& entry, const std::vector<std::string>& uuids) {
  if (entry.empty()) return -1;
  if (starts_with_nocase(entry, "GPU-")) {  // a whole UUID or a prefix naming exactly one GPU
    int found = -1;
    for (size_t i = 0; i < uuids.size(); ++i) {
      if (!uuids[i].empty() && starts_with_nocase(uuids[i], entry)) {
        if (found >= 0) return -1;  // ambiguous prefix
        found = static_cast<int>(i);
      }
    }
    return found;
  }
  // An index, read like strtoul reads it: leading digits ("1gpu" is 1); a sign or no digit ends.
  if (!std::isdigit(static_cast<unsigned char>(entry[0]))) return -1;  // also MIG-...: not handled
  long value = 0;
  for (char c : entry) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    value = value * 10 + (c - '0');
    if (value > 1 << 20) return -1;
  }
  return value < static_cast<long>(uuids.size()) ? static_cast<int>(value) : -1;
}

}  // namespace

std::vector<int> map_visible_devices(const char* visible, const std::vector<std::string>& nvml_uuids) {
  std::vector<int> out;
  if (!visible) {
    for (size_t i = 0; i < nvml_uuids.size(); ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  const std::string list = visible;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const int index = resolve_entry(trim(list.substr(start, comma - start)), nvml_uuids);
    if (index < 0) break;  // CUDA: devices after an invalid entry are not visible
    for (int seen : out)
      if (seen == index) return {};  // CUDA: a repeated device hides them all
    out.push_back(index);
    start = comma + 1;
  }
  return out;
}

std::vector<GpuStats> query_gpus() {
  std::string reason;
  const nvml::Api* api = nvml::api(&reason);
  if (!api) return {};
  NodeGpus node;
  if (!list_node_gpus(*api, node, reason)) return {};
  std::vector<GpuStats> out;
  const std::vector<int> visible = map_visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"), node.uuids);
  for (size_t k = 0; k < visible.size(); ++k) {
    GpuStats s;
    s.index = static_cast<int>(k);
    s.nvml_index = visible[k];
    if (nvml::Device h = node.handles[visible[k]]) {
      query_one(*api, h, s);
    } else {
      s.lost = true;
      s.unavailable = "nvmlDeviceGetHandleByIndex_v2 failed";
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string gpu_unavailable_reason() {
  std::string reason;
  const nvml::Api* api = nvml::api(&reason);
  if (!api) return reason;
  NodeGpus node;
  if (!list_node_gpus(*api, node, reason)) return reason;
  if (node.uuids.empty()) return "NVML sees no GPU";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (map_visible_devices(visible, node.uuids).empty())
    return fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" leaves none of the {} GPUs visible", visible, node.uuids.size());
  return "";
}

}  // namespace tandem::monitor
