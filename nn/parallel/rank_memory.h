// The bytes one rank holds for training, split as ZeRO divides them (docs/zero.md): the model's
// parameters, every buffer that holds gradient values, and the optimizer's state.
#pragma once
#include <cstdint>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace tandem::nn::parallel {

class Reducer;

struct RankMemory {
  int64_t param_bytes = 0;
  // The parameters' .grad, DDP's buckets, ZeRO's shard gradients: each byte once (a gradient that
  // is a view of its bucket is the bucket's).
  int64_t grad_bytes = 0;
  // The optimizer's per-parameter state (moments, momentum buffers, f32 master weights, step counts).
  int64_t optimizer_state_bytes = 0;
};

// Now: call it at (or after) an optimizer step. reducer: DDP's, or null.
RankMemory rank_memory(const Module& model, const Optimizer& optimizer, const Reducer* reducer);

}  // namespace tandem::nn::parallel
