// Samplers: the list of dataset indices a process visits in one epoch. The batch loader takes any
// Sampler, so a distributed sampler (a shard per rank) plugs in without touching the loader.
#pragma once
#include <cstdint>
#include <vector>

namespace tandem::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices to visit in `epoch`, in order. Must depend only on the sampler's settings and
  // `epoch`, so a resumed run sees the same order.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

// 0, 1, ..., n-1 every epoch (evaluation).
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t n) : n_(n) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
};

// A permutation of 0..n-1 per epoch: rand_permutation from the Philox draw (seed, offset = epoch).
class RandomSampler final : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
  uint64_t seed_;
};

// The permutation RandomSampler uses, for samplers built on top of it (a distributed one shards it).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace tandem::data
