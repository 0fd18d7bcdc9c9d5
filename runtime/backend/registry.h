// Kernel tables: one per backend-level kernel, one slot per device kind. An op's entry point
// (runtime/ops) validates its inputs and calls `table(device)(args...)`; each backend fills its slot
// from its own source file with TANDEM_REGISTER_KERNEL. An empty slot throws
// "backend <kind> does not support <kernel>".
#pragma once
#include <array>

#include "runtime/device.h"
#include "runtime/error.h"

namespace tandem {

template <class Signature>
class KernelTable;

template <class R, class... Args>
class KernelTable<R(Args...)> {
 public:
  using Fn = R (*)(Args...);
  explicit constexpr KernelTable(const char* name) : name_(name) {}

  void set(DeviceKind kind, Fn fn) { fns_[static_cast<int>(kind)] = fn; }
  bool has(DeviceKind kind) const { return fns_[static_cast<int>(kind)] != nullptr; }
  Fn operator()(Device device) const {
    Fn fn = fns_[static_cast<int>(device.kind)];
    if (!fn)
      TANDEM_FAIL(NotSupported, "backend {} does not support {}", device_kind_name(device.kind), name_);
    return fn;
  }
  const char* name() const { return name_; }

 private:
  const char* name_;
  std::array<Fn, kNumDeviceKinds> fns_{};
};

}  // namespace tandem

// Declares a kernel table in a header: TANDEM_KERNEL(relu_forward, void(const Tensor&, Tensor&));
#define TANDEM_KERNEL(name, ...) inline ::tandem::KernelTable<__VA_ARGS__> name{#name}

#define TANDEM_CONCAT_INNER(a, b) a##b
#define TANDEM_CONCAT(a, b) TANDEM_CONCAT_INNER(a, b)
// Fills a slot at static-initialisation time (the library is shared, so every object file's
// initialisers run): TANDEM_REGISTER_KERNEL(relu_forward, DeviceKind::CPU, cpu_relu_forward);
#define TANDEM_REGISTER_KERNEL(table, kind, fn) \
  static const bool TANDEM_CONCAT(tandem_registered_, __COUNTER__) = ((table).set((kind), (fn)), true)
