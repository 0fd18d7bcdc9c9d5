// --device auto over the node: node_device() (comm/communicator.h) with a say in which GPU, from
// the GPUs' free memory (runtime/monitor), agreed among the node's ranks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/monitor/device_selection.h"

namespace tandem::comm {

// The node's GPUs with the most free memory (NVML), one per rank of the node in order of free
// memory, skipping those with less than `min_free_bytes` free; the CPU when fewer remain than the
// node has ranks. The ranks of a node decide on local rank 0's figures (broadcast over the node
// when the job has several ranks, initialising MPI), so two ranks never pick one GPU. Without NVML
// figures: node_device() (cuda:<local rank>). The reason is one line, for logs and the done record.
monitor::DeviceChoice choose_node_device(uint64_t min_free_bytes = 0);

// What choose_node_device decides on: this rank's visible GPUs carrying local rank 0's free-memory
// figures (where this rank sees the same GPUs in the same order; else its own, and `note` says so),
// and the rank's place on its node. Collective over the job when it has several ranks.
struct NodeGpus {
  std::vector<monitor::GpuStats> gpus;
  int local_rank = 0, local_size = 1;
  std::string note;
};
NodeGpus node_gpu_figures();

// node_device()'s rule: cuda:<local rank> where the node's ranks each have a GPU, else the CPU.
Device device_by_local_rank(int local_rank, int local_size);

}  // namespace tandem::comm
