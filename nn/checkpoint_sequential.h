// checkpoint_sequential: a Sequential split into `segments` runs of consecutive children; every
// run but the last goes through checkpoint() (its activations are recomputed in backward), the
// last runs normally (its output is needed right away), as torch.utils.checkpoint does.
#pragma once
#include "nn/layers/sequential.h"
#include "runtime/checkpoint_activations.h"

namespace tandem::nn {

// BatchNorm running statistics of the checkpointed children are preserved across the recompute.
// With grad mode off (evaluation) this is a plain forward.
Tensor checkpoint_sequential(Sequential& seq, int segments, const Tensor& x,
                             Generator& gen = default_generator());

}  // namespace tandem::nn
