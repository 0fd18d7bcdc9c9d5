// What the runtime knows of the CUDA devices, for code above the backends (comm/, nn/, apps/): the
// CUDA backend fills it (kernels/cuda/runtime_cuda.cpp), and a build without CUDA links its stub
// (kernels/cuda/no_cuda.cpp). Callable whether or not the library was built with CUDA: without a
// driver, without a device, or built without CUDA, device_count() is 0 and nothing throws.
#pragma once
#include <cstddef>
#include <string>

#include "runtime/device.h"

namespace tandem::cuda {

int device_count();
bool available();
// "2 CUDA devices (NVIDIA H100 ...)" or "no CUDA device: <why>".
std::string describe();
// cuda:0 where a device is present, else the CPU; insist = true throws when there is no device.
Device default_device(bool insist = false);

// One device's fixed properties and its memory now (cudaMemGetInfo). Throws NotSupported for a
// device that is not there.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  size_t memory_total = 0, memory_free = 0;
};
DeviceInfo device_info(int index);

// The stream the backend queues `device`'s work on (a cudaStream_t), with the device made current on
// the calling thread: for code that orders its own work after the backend's (the NCCL
// communicator records an event on it). Throws NotSupported without CUDA.
void* native_stream(Device device);

// The CUDA device whose memory `p` points into, or -1 for host memory (always -1 without CUDA).
int pointer_device(const void* p);

}  // namespace tandem::cuda
