// Gradient (activation) checkpointing: checkpoint(fn, inputs) runs fn without recording its graph
// (only the inputs are kept) and, in backward, runs it again with grad enabled and backpropagates
// through the recomputed graph. The Generator's offset is rewound for the recompute, so dropout
// draws the same masks; the autocast state of the forward is restored too. Parameter gradients
// accumulate as usual (their grad-ready hooks fire, so DDP works unchanged).
#pragma once
#include <functional>
#include <vector>

#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct CheckpointOptions {
  Generator* generator = nullptr;  // the generator fn draws from (default: default_generator())
  // Tensors fn updates in place (BatchNorm running statistics): their values are saved before the
  // recompute and put back after it, so the recompute does not update them a second time.
  std::vector<Tensor> preserve;
};

// Outputs of fn(inputs). With grad mode on, the outputs require grad even when no input does, so
// the parameters inside fn get gradients (the first segment of a network takes plain data).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options = {});

}  // namespace tandem
