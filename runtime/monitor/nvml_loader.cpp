// NVML opened with dlopen on first use (like cuBLAS in kernels/cuda/cublas_loader.h), so tandem
// needs no NVIDIA library to load or run; nvmlShutdown at exit balances the one nvmlInit_v2.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "runtime/env_settings.h"
#include "runtime/monitor/nvml_api.h"

namespace tandem::monitor::nvml {

namespace {

struct Library {
  Api api;
  void* handle = nullptr;
  bool ready = false;  // opened, every symbol found, nvmlInit_v2 succeeded
  std::string reason;  // why not ready

  ~Library() {
    // Samplers stop in their destructors, before static destruction reaches this object.
    if (ready) api.shutdown();
  }
};

template <typename Fn>
bool bind(void* handle, const char* symbol, Fn& fn, const std::string& path, std::string& reason) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!fn) reason = fmt::format("{} has no {} (driver too old?)", path, symbol);
  return fn != nullptr;
}

void open(Library& lib) {
  const std::string path = env::text("TANDEM_NVML_LIBRARY").value_or("libnvidia-ml.so.1");
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* err = dlerror();
    lib.reason = fmt::format("{} not found: {}", path, err ? err : "dlopen failed");
    return;
  }
  Api& a = lib.api;
  const bool all = bind(lib.handle, "nvmlInit_v2", a.init_v2, path, lib.reason) &&
                   bind(lib.handle, "nvmlShutdown", a.shutdown, path, lib.reason) &&
                   bind(lib.handle, "nvmlErrorString", a.error_string, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetCount_v2", a.device_get_count_v2, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetHandleByIndex_v2", a.device_get_handle_by_index_v2, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetName", a.device_get_name, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetUUID", a.device_get_uuid, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetMemoryInfo", a.device_get_memory_info, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetUtilizationRates", a.device_get_utilization_rates, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetTemperature", a.device_get_temperature, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetPowerUsage", a.device_get_power_usage, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetEnforcedPowerLimit", a.device_get_enforced_power_limit, path,
                        lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetClockInfo", a.device_get_clock_info, path, lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetCudaComputeCapability", a.device_get_cuda_compute_capability, path,
                        lib.reason) &&
                   bind(lib.handle, "nvmlDeviceGetTotalEccErrors", a.device_get_total_ecc_errors, path, lib.reason);
  if (!all) return;
  if (Return r = a.init_v2(); r != kSuccess) {
    lib.reason = fmt::format("nvmlInit_v2 failed: {}", a.error_string(r));
    return;
  }
  lib.ready = true;
}

Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] { open(lib); });
  return lib;
}

}  // namespace

const Api* api(std::string* reason) {
  Library& lib = library();
  if (!lib.ready && reason) *reason = lib.reason;
  return lib.ready ? &lib.api : nullptr;
}

const char* error_string(Return r) {
  Library& lib = library();
  if (lib.api.error_string) {
    if (const char* s = lib.api.error_string(r)) return s;
  }
  return "unknown NVML error";
}

}  // namespace tandem::monitor::nvml
