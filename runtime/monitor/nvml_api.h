// Our declarations of the few NVML entry points and types the monitor uses (the build installs
// nothing from NVIDIA's SDK through apt, so nvml.h is not there), and the table of them that the
// monitor fills from dlopen("libnvidia-ml.so.1"). Signatures and enum values are those of NVML's
// nvml.h (the versioned _v2 entry points are the stable ones). Private to runtime/monitor.
#pragma once
#include <string>

namespace tandem::monitor::nvml {

using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;
constexpr Return kErrorNotSupported = 3;
constexpr Return kErrorGpuIsLost = 15;

struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t

struct Memory {  // nvmlMemory_t (bytes)
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t (percent over the driver's last sample period)
  unsigned int gpu, memory;
};

constexpr int kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;                 // NVML_CLOCK_SM
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr unsigned kNameBufferSize = 96;    // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBufferSize = 96;    // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// Enums are passed as int: NVML's enums are C enums of int size.
struct Api {
  Return (*init_v2)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*device_get_count_v2)(unsigned int*) = nullptr;
  Return (*device_get_handle_by_index_v2)(unsigned int, Device*) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_memory_info)(Device, Memory*) = nullptr;
  Return (*device_get_utilization_rates)(Device, Utilization*) = nullptr;
  Return (*device_get_temperature)(Device, int, unsigned int*) = nullptr;
  Return (*device_get_power_usage)(Device, unsigned int*) = nullptr;            // milliwatts
  Return (*device_get_enforced_power_limit)(Device, unsigned int*) = nullptr;   // milliwatts
  Return (*device_get_clock_info)(Device, int, unsigned int*) = nullptr;        // MHz
  Return (*device_get_cuda_compute_capability)(Device, int*, int*) = nullptr;
  Return (*device_get_total_ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
};

// The library, opened and initialised (nvmlInit_v2) once per process on the first call; null with
// `reason` set ("libnvidia-ml.so.1 not found: ...", "nvmlInit_v2 failed: Driver Not Loaded") when it
// cannot be. Thread-safe. TANDEM_NVML_LIBRARY names another file to open (tests use a fake NVML).
const Api* api(std::string* reason);

// "Not Supported" for `r` (nvmlErrorString), or "NVML error <r>" without the library.
const char* error_string(Return r);

}  // namespace tandem::monitor::nvml
