// Storage and the per-device-kind allocator table (the CPU's is in host_cache.cpp).
#include "runtime/storage.h"

#include <array>

#include "runtime/error.h"
#include "runtime/memory_budget.h"

namespace tandem {

namespace {
std::array<Allocator*, kNumDeviceKinds>& allocators() {
  static std::array<Allocator*, kNumDeviceKinds> table{&host_allocator(), nullptr, nullptr};
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
