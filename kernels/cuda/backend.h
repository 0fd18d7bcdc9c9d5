// Host side of the CUDA backend, implemented twice behind one interface: runtime_cuda.cpp (streams,
// stream-ordered pools, pinned staging, events) and runtime_sim.cpp (host memory, synchronous).
// Op code in the .cu files uses only this, TANDEM_LAUNCH and the kernel tables.
#pragma once
#include <cstddef>

#include "runtime/backend/cuda/platform.cuh"
#include "runtime/tensor.h"

namespace tandem::TANDEM_CUDA_NS {

// The device's one stream; makes the device current on the calling thread.
Stream stream_for(Device device);
// Stream-ordered device memory (cudaMallocAsync from the device's pool); SIM: aligned host memory.
void* device_alloc(size_t nbytes, Device device);
void device_free(void* ptr, Device device) noexcept;
// Copies bytes between host memory (CPU) and this backend's devices, in either direction.
// Returns with the data in place when the destination is host memory; host->device goes through a
// pinned staging buffer and is ordered on the device's stream.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Waits for all work queued on the device's stream.
void synchronize(Device device);
// Opens / closes the range a profiler started with collection off records (ncu/nsys
// --profile-from-start off); SIM: nothing to profile.
void profiler_start();
void profiler_stop();

// Orders work between streams/devices without a device-wide sync.
class Event {
 public:
  explicit Event(Device device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record();                 // on its device's stream
  void wait(Device other);       // other's stream waits for the recorded point
  void synchronize();            // the host waits
  bool ready();

 private:
  Device device_;
  void* event_ = nullptr;  // cudaEvent_t
};

// Checks that every tensor is defined on a device of this backend (same device), naming `what`.
void check_on_device(const char* what, Device device, std::initializer_list<const Tensor*> tensors);

}  // namespace tandem::TANDEM_CUDA_NS
