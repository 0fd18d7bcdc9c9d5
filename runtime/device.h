// Device = {kind, index}. CPU devices carry an index too (cpu:0, cpu:1) so single-process
// multi-device code runs on a machine without a GPU. SIM is the CUDA backend compiled for the SIMT
// emulator (host memory standing in for device memory), used by tests.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace tandem {

enum class DeviceKind : uint8_t { CPU = 0, CUDA = 1, SIM = 2 };
constexpr int kNumDeviceKinds = 3;

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceKind k, int i = 0) : kind(k), index(i) {}
  static Device parse(const std::string& text);  // "cpu", "cpu:1", "cuda:0", "sim:0"; throws ValueError

  bool is_cpu() const { return kind == DeviceKind::CPU; }
  // Memory that host code can read directly (CPU, and SIM whose "device memory" is host memory).
  bool is_host_addressable() const { return kind != DeviceKind::CUDA; }
  std::string str() const;
  friend bool operator==(Device a, Device b) { return a.kind == b.kind && a.index == b.index; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};

const char* device_kind_name(DeviceKind k);
inline constexpr Device kCPU{DeviceKind::CPU, 0};

}  // namespace tandem
