// --amp: flag to dtype and scaler.
#include "train/amp_config.h"

#include "runtime/error.h"

namespace tandem::train {

AmpConfig AmpConfig::parse(const std::string& flag) {
  AmpConfig c;
  if (flag.empty() || flag == "off" || flag == "none" || flag == "fp32" || flag == "f32") return c;
  if (flag == "f16" || flag == "fp16") c.dtype = DType::f16;
  else if (flag == "bf16") c.dtype = DType::bf16;
  else TANDEM_FAIL(Value, "--amp {}: expected f16, bf16 or off", flag);
  return c;
}

nn::GradScaler make_grad_scaler(const AmpConfig& amp, comm::Communicator* comm) {
  nn::GradScalerOptions o;
  o.enabled = amp.dtype == DType::f16;
  return nn::GradScaler(o, comm);
}

}  // namespace tandem::train
