// --device auto over the node: node_device() (comm/communicator.h) with a say in which GPU, from
// the GPUs' free memory (runtime/monitor), agreed among the node's ranks.
#pragma once
#include <cstdint>

#include "runtime/device.h"
#include "runtime/monitor/device_selection.h"

namespace tandem::comm {

// The node's GPUs with the most free memory (NVML), one per rank of the node in order of free
// memory, skipping those with less than `min_free_bytes` free; the CPU when fewer remain than the
// node has ranks. The ranks of a node decide on local rank 0's figures (broadcast over the node
// when the job has several ranks, initialising MPI), so two ranks never pick one GPU. Without NVML
// figures: node_device() (cuda:<local rank>). The reason is one line, for logs and the done record.
monitor::DeviceChoice choose_node_device(uint64_t min_free_bytes = 0);

// node_device()'s rule: cuda:<local rank> where the node's ranks each have a GPU, else the CPU.
Device device_by_local_rank(int local_rank, int local_size);

}  // namespace tandem::comm
