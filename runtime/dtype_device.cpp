// Names and parsing for DType and Device.
#include <string>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace tandem {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8})
    if (name == dtype_name(t)) return t;
  TANDEM_FAIL(Value, "unknown dtype '{}' (expected f32, f64, f16, bf16, i32, i64 or u8)", name);
}

const char* device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::CUDA: return "cuda";
    case DeviceKind::SIM: return "sim";
  }
  return "?";
}

std::string Device::str() const { return fmt::format("{}:{}", device_kind_name(kind), index); }

Device Device::parse(const std::string& text) {
  auto colon = text.find(':');
  std::string kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    std::string idx = text.substr(colon + 1);
    TANDEM_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
                 "bad device '{}': the index after ':' must be a non-negative integer", text);
    index = std::stoi(idx);
  }
  for (DeviceKind k : {DeviceKind::CPU, DeviceKind::CUDA, DeviceKind::SIM})
    if (kind == device_kind_name(k)) return Device(k, index);
  TANDEM_FAIL(Value, "bad device '{}': expected cpu[:N], cuda[:N] or sim[:N]", text);
}

}  // namespace tandem
