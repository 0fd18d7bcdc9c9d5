// Tensor-memory accounting per device and an optional budget per device kind (tandem-train's
// --memory-limit): Storage charges every allocation it makes and releases it when freed, so a budget
// makes a CPU (or `sim`) run fail as a GPU that is full would, with OutOfMemoryError, and the
// out-of-memory recovery of a training loop runs and is tested everywhere.
#pragma once
#include <cstddef>
#include <string>

#include "runtime/device.h"
#include "runtime/error.h"

namespace tandem {

// A device (or a device under a budget) has no memory left for a tensor: a budget exceeded, a
// failed host allocation, or CUDA's cudaErrorMemoryAllocation. A training loop may recover (free
// the step's tensors, smaller micro-batches); other code treats it as any BackendError.
class OutOfMemoryError : public BackendError {
  using BackendError::BackendError;
};

// Throws OutOfMemoryError "file:line: message" (the form of every tandem error).
[[noreturn]] void throw_out_of_memory(const char* file, int line, const std::string& message);

namespace memory {

// The budget of each device of `kind` in bytes (0: none). Allocations beyond it throw.
void set_limit(DeviceKind kind, size_t bytes);
size_t limit(DeviceKind kind);
// Bytes of tensor memory held now, and the most held since the last reset_peak, on `device`.
size_t in_use(Device device);
size_t peak(Device device);
void reset_peak(Device device);

// Called by Storage: charge throws OutOfMemoryError when `nbytes` more would pass the budget.
void charge(Device device, size_t nbytes);
void release(Device device, size_t nbytes) noexcept;

// "96MB", "2GB", "512KiB", "1.5GiB", "100 MiB", "4096" (bytes): KB/MB/GB/TB (or K/M/G/T) are powers
// of 1000, KiB/MiB/GiB/TiB of 1024, case-insensitive, spaces allowed, B optional. ValueError on
// anything else (a sign, no number, an unknown unit, 9e18 bytes or more). The one size reader of
// tandem: --memory-limit, --min-free-memory, TANDEM_HOST_CACHE.
size_t parse_size(const std::string& text);
std::string format_size(size_t bytes);  // "95.4 MiB"

}  // namespace memory
}  // namespace tandem
