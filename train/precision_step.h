// The precision of a training step, written once for the engine's Trainer (FullTrainer) and the C
// API's Session: --amp (training.amp) as autocast around the forward, the GradScaler around the
// backward (f16 only: bf16 has f32's range and needs no loss scaling, as PyTorch recommends), and
// the update that follows: unscale, clip the global gradient norm, step (or skip a step whose
// gradients are not finite), update the scale.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "nn/amp/grad_scaler.h"
#include "nn/config/run_config.h"
#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/ranked_norm.h"
#include "runtime/autocast.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace tandem::train {

class PrecisionStep {
 public:
  // comm: the ranks whose found-inf flags the scaler combines (null: one process).
  explicit PrecisionStep(nn::config::Amp amp, comm::Communicator* comm = nullptr);

  // f(), under autocast to the step's low precision (none for amp off).
  template <class F>
  auto forward(F&& f) const {
    if (!dtype_) return std::forward<F>(f)();
    AutocastGuard autocast(*dtype_);
    return std::forward<F>(f)();
  }
  // loss (already weighted for accumulation) scaled, then backward.
  void backward(const Tensor& loss) { scaler_.scale(loss).backward(); }
  // The update once the step's gradients are complete (and reduced): nn::clipped_scaler_step with
  // max_norm `grad_clip` (0: no clipping). The caller zeroes the gradients and steps its schedule.
  void update(nn::Optimizer& optimizer, const std::vector<Tensor>& params, double grad_clip) {
    nn::clipped_scaler_step(scaler_, optimizer, params, grad_clip);
  }
  // With DDP: the norm in its rank order (nn/parallel/ranked_norm.h), the same at every zero_stage.
  void update(nn::Optimizer& optimizer, nn::parallel::DistributedDataParallel* ddp, const std::vector<Tensor>& params,
              double grad_clip) {
    if (!ddp) return update(optimizer, params, grad_clip);
    nn::clipped_scaler_step(
        scaler_, optimizer, [ddp](double max_norm) { nn::parallel::clip_grad_norm_ranked(*ddp, max_norm); }, grad_clip);
  }

  std::optional<DType> dtype() const { return dtype_; }  // nullopt: f32
  nn::GradScaler& scaler() { return scaler_; }            // checkpoints save and restore its scale

 private:
  std::optional<DType> dtype_;
  nn::GradScaler scaler_;
};

}  // namespace tandem::train
