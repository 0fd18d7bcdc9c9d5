// DistributedSampler: the epoch's permutation, padding/trimming and the round-robin deal.
#include "nn/parallel/distributed_sampler.h"

#include <algorithm>
#include <numeric>

#include "runtime/error.h"

namespace tandem::nn::parallel {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  TANDEM_CHECK(dataset_size >= 0, "DistributedSampler: dataset size {} is negative", dataset_size);
  TANDEM_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got {}", num_replicas);
  TANDEM_CHECK(rank >= 0 && rank < num_replicas,
               "DistributedSampler: invalid rank {}, rank should be in the interval [0, {}]", rank,
               num_replicas - 1);
  const int64_t n = num_replicas;
  if (options_.drop_last && dataset_size % n != 0)
    num_samples_ = dataset_size / n;  // the largest share every rank can have without repeats
  else
    num_samples_ = (dataset_size + n - 1) / n;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  TANDEM_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be >= 0, got {}", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::global_indices(int64_t epoch) const {
  std::vector<int64_t> idx;
  if (options_.shuffle) {
    // Every rank computes the same permutation from (seed, epoch) without talking to the others.
    idx = data::epoch_permutation(dataset_size_, options_.seed, epoch);
  } else {
    idx.resize(static_cast<size_t>(dataset_size_));
    std::iota(idx.begin(), idx.end(), int64_t{0});
  }
  const size_t total = static_cast<size_t>(total_size());
  if (idx.size() < total) {
    // Pad by repeating from the front (several times over when the dataset is smaller than the world).
    const size_t n = idx.size();
    for (size_t i = 0; idx.size() < total; ++i) idx.push_back(idx[i % n]);
  } else {
    idx.resize(total);
  }
  return idx;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all = global_indices(epoch);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(rank_); i < all.size(); i += static_cast<size_t>(num_replicas_))
    mine.push_back(all[i]);
  return mine;
}

ShardRange eval_shard(int64_t n, int world_size, int rank) {
  TANDEM_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "eval_shard: rank {} outside a world of {}",
               rank, world_size);
  const int64_t base = n / world_size, extra = n % world_size;
  ShardRange r;
  r.begin = rank * base + std::min<int64_t>(rank, extra);
  r.end = r.begin + base + (rank < extra ? 1 : 0);
  return r;
}

}  // namespace tandem::nn::parallel
