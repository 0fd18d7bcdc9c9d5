// rank_memory: parameters, gradient buffers counted by the byte ranges of their storages, optimizer state.
#include "nn/parallel/rank_memory.h"

#include <algorithm>
#include <map>
#include <vector>

#include "nn/parallel/reducer.h"
#include "nn/parallel/zero_optimizer.h"

namespace tandem::nn::parallel {

namespace {
// Bytes covered by the tensors, each byte once (views of one storage overlap).
int64_t distinct_bytes(const std::vector<Tensor>& tensors) {
  std::map<const void*, std::vector<std::pair<size_t, size_t>>> ranges;
  for (const Tensor& t : tensors)
    if (t.defined() && t.nbytes() > 0)
      ranges[t.storage().get()].push_back({t.storage_offset(), t.storage_offset() + t.nbytes()});
  int64_t total = 0;
  for (auto& [storage, r] : ranges) {
    std::sort(r.begin(), r.end());
    size_t end = 0;
    for (auto [a, z] : r) {
      a = std::max(a, end);
      if (z > a) total += static_cast<int64_t>(z - a);
      end = std::max(end, z);
    }
  }
  return total;
}
}  // namespace

RankMemory rank_memory(const Module& model, const Optimizer& optimizer, const Reducer* reducer) {
  RankMemory m;
  std::vector<Tensor> params = model.parameters(), grads;
  m.param_bytes = distinct_bytes(params);
  for (const Tensor& p : params) grads.push_back(p.grad());
  if (reducer)  // the buckets (stage 2: their pool) and the shards' gradients
    for (const Tensor& t : reducer->gradient_buffers()) grads.push_back(t);
  m.grad_bytes = distinct_bytes(grads);
  // "state.<i>.<name>" entries; the lr of each group and the step count are not per parameter.
  // ZeRO: this rank's shard optimizer (its state_tensors() is the consolidated whole).
  auto* zero = dynamic_cast<const ZeroOptimizer*>(&optimizer);
  for (const auto& [name, t] : (zero ? zero->shard_optimizer() : optimizer).state_tensors())
    if (name.rfind("state.", 0) == 0) m.optimizer_state_bytes += static_cast<int64_t>(t.nbytes());
  return m;
}

}  // namespace tandem::nn::parallel
