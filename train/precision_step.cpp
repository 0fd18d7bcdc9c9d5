// --amp as the autocast dtype and the scaler it needs.
#include "train/precision_step.h"

namespace tandem::train {

namespace {

std::optional<DType> autocast_dtype(nn::config::Amp amp) {
  if (amp == nn::config::Amp::F16) return DType::f16;
  if (amp == nn::config::Amp::BF16) return DType::bf16;
  return std::nullopt;
}

nn::GradScalerOptions scaler_options(nn::config::Amp amp) {
  nn::GradScalerOptions o;
  o.enabled = amp == nn::config::Amp::F16;  // disabled: scale() is the identity, step() a plain step
  return o;
}

}  // namespace

PrecisionStep::PrecisionStep(nn::config::Amp amp, comm::Communicator* comm)
    : dtype_(autocast_dtype(amp)), scaler_(scaler_options(amp), comm) {}

}  // namespace tandem::train
