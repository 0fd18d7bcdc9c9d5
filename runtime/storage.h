// Storage: one allocation on one device, shared by a tensor and its views. Allocators are a table
// per device kind; the CPU's hands out 64-byte aligned memory and
// keeps large freed blocks for reuse (runtime/host_cache.h).
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/device.h"

namespace tandem {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, Device device) noexcept = 0;
};

// The allocator of a device kind; throws NotSupportedError where no backend registered one.
Allocator& allocator_for(Device device);
void register_allocator(DeviceKind kind, Allocator* allocator);
// The CPU's: 64-byte aligned blocks, the large ones cached for reuse (runtime/host_cache.h).
Allocator& host_allocator();

class Storage {
 public:
  Storage(size_t nbytes, Device device);                          // allocates
  Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner);  // wraps memory kept alive by owner
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::shared_ptr<void> owner_;  // set when the memory is borrowed
};

}  // namespace tandem
