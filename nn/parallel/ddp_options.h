// DistributedDataParallel's options: the one struct (and the one place of each default) that DDP,
// its Reducer and the apps' flags share. Semantics follow PyTorch's DistributedDataParallel.
#pragma once

namespace tandem::nn::parallel {

struct DDPOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;  // a small first bucket starts communication early in backward
  // Search the graph of each forward for parameters that will get no gradient and reduce zeros for
  // them (costs a graph traversal per forward).
  bool find_unused_parameters = false;
  // Gradients are views into the bucket buffers: no copy in or out.
  bool gradient_as_bucket_view = false;
  // Broadcast rank 0's buffers (BN running statistics) before each synchronised forward (grad
  // enabled, outside no_sync()); forwards under NoGradGuard are local, so ranks may evaluate
  // different numbers of batches.
  bool broadcast_buffers = true;
  // The set of used parameters is the same every iteration: found once (first iteration), then
  // checked; no per-forward search even with unused parameters.
  bool static_graph = false;
  // ZeRO (nn/parallel/zero_optimizer.h, docs/zero.md): 0 replicates everything (plain DDP); 1
  // reduce-scatters the buckets so that each rank reduces and updates only its shard (the optimizer
  // state of the shard alone, wrapped by ZeroOptimizer), the updated parameters all-gathered; 2 also
  // frees the gradients outside the shard once their bucket is reduce-scattered. The weights stay
  // bitwise those of stage 0 on the same ranks.
  int zero_stage = 0;
};

}  // namespace tandem::nn::parallel
