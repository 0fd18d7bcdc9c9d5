// Sequential and seeded random samplers.
#include "runtime/data/sampler.h"

#include <numeric>

#include "runtime/error.h"
#include "runtime/random.h"

namespace tandem::data {

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> idx(static_cast<size_t>(n_));
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  TANDEM_CHECK(epoch >= 0, "epoch must be >= 0, got {}", epoch);
  Generator gen(seed);
  gen.set_state(seed, static_cast<uint64_t>(epoch));
  return rand_permutation(n, gen);
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const { return epoch_permutation(n_, seed_, epoch); }

}  // namespace tandem::data
