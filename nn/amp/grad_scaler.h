// GradScaler: dynamic loss scaling with torch.cuda.amp.GradScaler's semantics and defaults.
//   loss = scaler.scale(loss); loss.backward();
//   scaler.unscale_(opt);            // optional: before clipping gradients yourself
//   scaler.step(opt);                // skipped when a gradient holds inf/nan
//   scaler.update();                 // backoff x0.5 after a skipped step, growth x2 after 2000 clean ones
// The inf/nan check is one multi-tensor pass per device and per step (fused with the unscale, or
// with the fused optimizers' norm pass). Under DDP pass the communicator: the found-inf flag is
// all-reduced with Max so every rank skips (or takes) the same steps and keeps the same scale.
#pragma once
#include <functional>
#include <cstdint>

#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "runtime/tensor.h"

namespace tandem::comm {
class Communicator;
}

namespace tandem::nn {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() is the identity, step() is a plain step
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {}, comm::Communicator* comm = nullptr);

  // loss * scale (differentiable; the scale kept in f32 as PyTorch's).
  Tensor scale(const Tensor& loss) const;
  // Multiplies the optimizer's gradients by 1/scale in place and records whether any is inf/nan.
  // At most once per step (a second call before update() is an error, as in PyTorch).
  void unscale_(Optimizer& optimizer);
  // Takes the optimizer's step unless a gradient was inf/nan; returns whether it stepped. Fused
  // optimizers get the unscale folded into their update when unscale_ was not called.
  bool step(Optimizer& optimizer);
  // Adjusts the scale after step(): x backoff when the step was skipped (and resets the growth
  // tracker), x growth after growth_interval consecutive clean steps.
  void update();
  void update(double new_scale);  // sets the scale explicitly

  double get_scale() const { return enabled_ ? static_cast<double>(scale_) : 1.0; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }  // of the current (last) step
  bool is_enabled() const { return enabled_; }
  const GradScalerOptions& options() const { return options_; }

  // "scale" (f32 scalar), "growth_tracker" (i64 scalar), and the options as f64 scalars
  // ("growth_factor", "backoff_factor", "growth_interval") as PyTorch's state_dict.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 private:
  enum class StepStage { Ready, Unscaled, Stepped };
  bool reduce_found_inf(bool local) const;
  GradScalerOptions options_;
  comm::Communicator* comm_;
  bool enabled_;
  float scale_;
  int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
  StepStage stage_ = StepStage::Ready;
};

// The optimizer step of a training loop under a scaler: unscale and clip the global gradient norm
// of `params` to `max_norm` (0: no clipping; nothing to clip when a gradient is inf/nan, as that step
// is skipped), scaler.step, scaler.update. tandem-train's loop and the C API's share it.
void clipped_scaler_step(GradScaler& scaler, Optimizer& optimizer, const std::vector<Tensor>& params,
                         double max_norm);
// The same with the clipping given: clip(max_norm) clips the unscaled gradients (DDP's rank-ordered
// norm, nn/parallel/ranked_norm.h, which ZeRO's shards compute alike).
void clipped_scaler_step(GradScaler& scaler, Optimizer& optimizer, const std::function<void(double)>& clip,
                         double max_norm);

}  // namespace tandem::nn
