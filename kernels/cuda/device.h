// CUDA device discovery, callable whether or not the library was built with CUDA: without a
// driver, without a device, or built without CUDA, device_count() is 0 and nothing throws.
#pragma once
#include <string>

#include "runtime/device.h"

namespace tandem::cuda {

int device_count();
bool available();
// "2 CUDA devices (NVIDIA H100 ...)" or "no CUDA device: <why>".
std::string describe();
// cuda:0 where a device is present, else the CPU; insist = true throws when there is no device.
Device default_device(bool insist = false);

}  // namespace tandem::cuda
