// Work gathered per device, devices in the order first seen: the multi-tensor kernels take one
// device's tensors a launch, so zero_grads, Adam and the fused optimizers split their lists this
// way. Internal to nn/optim (not installed: cmake/install.cmake).
#pragma once
#include <algorithm>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace tandem::nn {

template <typename Work>
class PerDevice {
 public:
  // The device's work, empty the first time it is named.
  Work& operator[](Device device) {
    auto it = std::find_if(lists_.begin(), lists_.end(), [&](const auto& l) { return l.first == device; });
    if (it == lists_.end()) it = lists_.insert(lists_.end(), {device, Work{}});
    return it->second;
  }
  // (device, work) pairs in first-seen order: a handful of devices, so a vector and a linear find.
  auto begin() { return lists_.begin(); }
  auto end() { return lists_.end(); }

 private:
  std::vector<std::pair<Device, Work>> lists_;
};

}  // namespace tandem::nn
