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
  if (reducer) {
    const size_t buckets = reducer->bucket_indices().size();
    for (size_t b = 0; b < buckets; ++b) grads.push_back(reducer->bucket_buffer(b));
    if (reducer->zero_stage() > 0)
      for (size_t b = 0; b < buckets; ++b) grads.push_back(reducer->shard_grad(b));
  }
  m.grad_bytes = distinct_bytes(grads);
  // "state.<i>.<name>" entries; the lr of each group and the step count are not per parameter.
  // ZeRO: this rank's shard optimizer (its state_tensors() is the consolidated whole).
  auto* zero = dynamic_cast<const ZeroOptimizer*>(&optimizer);
  for (const auto& [name, t] : (zero ? zero->shard_optimizer() : optimizer).state_tensors())
    if (name.rfind("state.", 0) == 0) m.optimizer_state_bytes += static_cast<int64_t>(t.nbytes());
  return m;
}

}  // namespace tandem::nn::parallel
