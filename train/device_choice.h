// tandem-train's --device: the device a run's model goes to, and why. Internal (the apps' choice
// among a node's GPUs; a program names its device).
#pragma once
#include "runtime/monitor/device_selection.h"
#include "train/train_config.h"

namespace tandem::train {

// --device: cpu; cuda:N; cuda (cuda:<local rank>; an error where a node has more ranks than GPUs);
// auto (cuda:<local rank> where each rank on the node has a GPU, else cpu; by free memory:
// comm::choose_node_device, skipping GPUs below --min-free-memory). --mode dp starts on the CPU (its
// replicas go to --devices). With the reason in one line.
monitor::DeviceChoice resolve_device_choice(const TrainConfig& cfg);

}  // namespace tandem::train
