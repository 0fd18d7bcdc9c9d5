// DistributedSampler: each rank's share of a dataset's indices for one epoch, as PyTorch's: the
// epoch's permutation (the same one data::RandomSampler uses, seeded by (seed, epoch)), padded to a
// multiple of the world size or trimmed with drop_last, then dealt round-robin so that the shards
// are disjoint and of equal length. A data::Sampler, so it plugs into data::BatchLoader.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/data/sampler.h"

namespace tandem::nn::parallel {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  // true: drop the tail so every rank gets the same number of samples and none is seen twice;
  // false: pad by repeating the first indices of the permutation.
  bool drop_last = false;
};

class DistributedSampler final : public data::Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});

  // Call at the start of every epoch: a different permutation per epoch, the same on every rank.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch (set_epoch) or a given one, in visiting order.
  std::vector<int64_t> indices() const { return indices(epoch_); }
  std::vector<int64_t> indices(int64_t epoch) const override;
  // The padded/trimmed permutation that the shards are dealt from (shard r = entries r, r+N, ...).
  std::vector<int64_t> global_indices(int64_t epoch) const;

  int64_t num_samples() const { return num_samples_; }  // per rank
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  DistributedSamplerOptions options_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

// Evaluation shards: rank r gets rows [begin, end) of a contiguous, unpadded split of n samples
// (the first n % world ranks get one more), so that summing per-rank metrics counts every sample
// exactly once.
struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
ShardRange eval_shard(int64_t n, int world_size, int rank);

}  // namespace tandem::nn::parallel
