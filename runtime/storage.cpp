// Storage and the per-device-kind allocator table; the CPU allocator lives here.
#include "runtime/storage.h"

#include <array>
#include <cstdlib>
#include <new>

#include "runtime/error.h"
#include "runtime/memory_budget.h"

namespace tandem {

namespace {
constexpr size_t kCpuAlignment = 64;  // a cache line, and the widest vector load (AVX-512)

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
    if (p == nullptr) throw_out_of_memory(__FILE__, __LINE__, fmt::format("out of host memory allocating {} bytes", nbytes));
    return p;
  }
  void deallocate(void* ptr, Device) noexcept override { std::free(ptr); }
};

std::array<Allocator*, kNumDeviceKinds>& allocators() {
  static CpuAllocator cpu;
  static std::array<Allocator*, kNumDeviceKinds> table{&cpu, nullptr, nullptr};
  return table;
}
}  // namespace

Allocator& allocator_for(Device device) {
  Allocator* a = allocators()[static_cast<int>(device.kind)];
  if (!a) TANDEM_FAIL(NotSupported, "no allocator for device {} (backend not built or not loaded)", device.str());
  return *a;
}

void register_allocator(DeviceKind kind, Allocator* allocator) { allocators()[static_cast<int>(kind)] = allocator; }

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  memory::charge(device, nbytes);  // OutOfMemoryError past a --memory-limit budget
  try {
    data_ = allocator_for(device).allocate(nbytes, device);
  } catch (...) {
    memory::release(device, nbytes);
    throw;
  }
}

Storage::Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (owner_) return;
  if (data_) allocator_for(device_).deallocate(data_, device_);
  memory::release(device_, nbytes_);
}

}  // namespace tandem
