// The GPUs this process can see, with their figures from NVML (opened with dlopen on first use, so
// a build or a machine without the driver runs everywhere): identity, memory, utilisation,
// temperature, power, SM clock, ECC errors. Monitoring never throws into training: what NVML cannot
// tell (no library, a figure a GPU does not support, a GPU that fell off the bus) is "unavailable",
// an empty std::optional, with the reason in words.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::monitor {

struct GpuStats {
  int index = -1;       // the CUDA index this process uses (cuda:<index>), after CUDA_VISIBLE_DEVICES
  int nvml_index = -1;  // NVML's index (all GPUs of the node, PCI bus order), as nvidia-smi and DCGM number them
  std::string name;     // "NVIDIA H100 80GB HBM3" (empty when unavailable)
  std::string uuid;     // "GPU-8932f937-..." (empty when unavailable)
  std::optional<int> cc_major, cc_minor;  // compute capability
  std::optional<uint64_t> memory_total, memory_free, memory_used;  // bytes
  std::optional<unsigned> util_gpu, util_memory;  // percent over the driver's last sample period
  std::optional<unsigned> temperature_c;
  std::optional<double> power_w, power_limit_w;  // draw now, enforced limit
  std::optional<unsigned> sm_clock_mhz;
  std::optional<uint64_t> ecc_uncorrected_volatile;  // double-bit errors since the driver loaded
  bool lost = false;  // NVML said the GPU is lost (fell off the bus): every figure is unavailable
  // Why figures are missing, "; "-separated ("power: Not Supported; ecc: Not Supported"). Empty
  // when every figure is there.
  std::string unavailable;
};

// The GPUs this process sees, in CUDA's order: CUDA_VISIBLE_DEVICES (indices or GPU-UUIDs, whole or
// a unique prefix) applied to NVML's list as CUDA applies it; an invalid entry ends the list.
// Indices map to NVML's order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID (and on nodes of
// one GPU model). Empty, never throwing, when NVML is unavailable: gpu_unavailable_reason() says why.
std::vector<GpuStats> query_gpus();

// Why query_gpus() has nothing: "libnvidia-ml.so.1 not found: ...", "nvmlInit_v2 failed: Driver Not
// Loaded", "CUDA_VISIBLE_DEVICES=\"\" hides every GPU", "NVML sees no GPU". Empty when GPUs are there.
std::string gpu_unavailable_reason();

// CUDA_VISIBLE_DEVICES applied to NVML's GPUs, given by their UUIDs in NVML order: the NVML index
// of each CUDA device in order. `visible` null: the variable is unset (every GPU). Public for tests.
std::vector<int> map_visible_devices(const char* visible, const std::vector<std::string>& nvml_uuids);

}  // namespace tandem::monitor
