// EMA of a model's weights: shadow = decay * shadow + (1 - decay) * param every `every` optimizer
// steps (buffers such as BatchNorm statistics are copied), kept in f32 (f64 for f64 params) on the
// parameters' device. Parameters are equal on every DDP rank, so the EMA is too. For evaluation,
// swap the EMA weights in with EMA::Scope and they are swapped back out at scope exit.
#pragma once
#include <cstdint>

#include "nn/module.h"

namespace tandem::nn {

struct EMAOptions {
  double decay = 0.999;
  int64_t every = 1;  // update on every k-th call of update() (steps k, 2k, ...)
};

class EMA {
 public:
  EMA(const Module& model, const EMAOptions& options = {});

  // Call once per optimizer step (after it); averages on every `every`-th call.
  void update(const Module& model);
  int64_t steps() const { return steps_; }
  int64_t num_updates() const { return num_updates_; }
  const EMAOptions& options() const { return options_; }
  // The shadow values, named as model.state_dict() (parameters then buffers).
  const NamedTensors& shadow() const { return shadow_; }
  // Copies the EMA values into `model` (for export or a final evaluation).
  void copy_to(Module& model) const;

  // Swaps the EMA weights into the model for its lifetime (evaluation), then restores them.
  class Scope {
   public:
    Scope(const EMA& ema, Module& model);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Module& model_;
    NamedTensors saved_;
  };

  // Checkpoint state: the shadows, plus "__steps" and "__num_updates" (i64 scalars).
  NamedTensors state_tensors() const;
  void load_state_tensors(const NamedTensors& state);

 private:
  EMAOptions options_;
  NamedTensors shadow_;
  std::vector<bool> is_param_;
  int64_t steps_ = 0;
  int64_t num_updates_ = 0;
};

}  // namespace tandem::nn
