// Which device a rank trains on when asked for "auto": per node, the GPUs with the most free
// memory, skipping those below a minimum, one GPU per rank; the CPU when the node has too few, with
// the reason in one line (it goes into the log and the run's done record).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/monitor/gpu_monitor.h"

namespace tandem::monitor {

struct DeviceChoice {
  Device device = kCPU;
  std::string reason;  // "cuda:1 (Fake GPU H100): 70.0 GiB free of 80.0 GiB, the most of 3 GPUs ..."
};

// A pure function of what it is given, so every case is tested without a GPU. `gpus`: this node's
// visible GPUs (query_gpus()); a GPU whose free memory is unavailable counts as not eligible.
// Ranks 0..local_size-1 of the node get the eligible GPUs in order of free memory, most first
// (ties: lower index), so ranks agree without talking as long as they see the same figures.
DeviceChoice choose_device(const std::vector<GpuStats>& gpus, int local_rank, int local_size,
                           uint64_t min_free_bytes);


// "70.0 GiB"
std::string format_bytes(uint64_t bytes);

}  // namespace tandem::monitor
