// --amp for the training apps: the flag parsed into the autocast dtype, and the GradScaler it needs.
#pragma once
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "nn/amp/grad_scaler.h"
#include "runtime/dtype.h"

namespace tandem::train {

// --amp: "off" (or ""), "f16", "bf16".
struct AmpConfig {
  std::optional<DType> dtype;  // nullopt: fp32
  static AmpConfig parse(const std::string& flag);  // ValueError naming the flag otherwise
};
// f16 needs loss scaling (a narrow exponent range); bf16 has f32's range and needs none, so its
// scaler is disabled (scale() is the identity, step() a plain step), as PyTorch recommends.
nn::GradScaler make_grad_scaler(const AmpConfig& amp, comm::Communicator* comm = nullptr);

}  // namespace tandem::train
