// A tensor-memory budget for one scope: set on construction, removed (0: no limit) on exit, also when
// the scope is left by an exception, so that one failing test cannot starve the next.
#pragma once
#include <cstddef>

#include "runtime/memory_budget.h"

namespace tandem::testing {

class ScopedMemoryLimit {
 public:
  ScopedMemoryLimit(DeviceKind kind, size_t bytes) : kind_(kind) { memory::set_limit(kind_, bytes); }
  ~ScopedMemoryLimit() { memory::set_limit(kind_, 0); }
  ScopedMemoryLimit(const ScopedMemoryLimit&) = delete;
  ScopedMemoryLimit& operator=(const ScopedMemoryLimit&) = delete;

 private:
  DeviceKind kind_;
};

}  // namespace tandem::testing
