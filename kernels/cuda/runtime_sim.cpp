// Host side of DeviceKind::SIM: the CUDA backend's host code runs with host memory standing in for
// device memory; every "stream" is synchronous because emulated launches run to completion.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/backend.h"
#include "runtime/memory_budget.h"
#include "runtime/storage.h"

namespace tandem::sim {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's alignment, so vectorised loads see the same

class SimAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override { return device_alloc(nbytes, device); }
  void deallocate(void* ptr, Device device) noexcept override { device_free(ptr, device); }
};

SimAllocator g_allocator;
const bool g_registered = (register_allocator(DeviceKind::SIM, &g_allocator), true);

}  // namespace

Stream stream_for(Device) { return nullptr; }

void* device_alloc(size_t nbytes, Device device) {
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr)
    throw_out_of_memory(__FILE__, __LINE__,
                        fmt::format("out of host memory allocating {} bytes for {}", nbytes, device.str()));
  return p;
}

void device_free(void* ptr, Device) noexcept { std::free(ptr); }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  TANDEM_CHECK(dst_device.is_host_addressable() && src_device.is_host_addressable(),
               "sim copy: {} -> {} is not supported (sim copies to and from the CPU and sim devices)",
               src_device.str(), dst_device.str());
  if (nbytes > 0 && dst != src) std::memmove(dst, src, nbytes);
}

void synchronize(Device) {}
void profiler_start() {}
void profiler_stop() {}

Event::Event(Device device) : device_(device) {}
Event::~Event() = default;
void Event::record() {}
void Event::wait(Device) {}
void Event::synchronize() {}
bool Event::ready() { return true; }

}  // namespace tandem::sim
