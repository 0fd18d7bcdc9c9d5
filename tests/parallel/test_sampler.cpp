// DistributedSampler: shards are disjoint, cover the dataset exactly once per epoch (drop_last or a
// divisible size) or with the documented padding, change with set_epoch, and reduce to the random
// sampler's order on one rank; eval_shard splits without padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "nn/parallel/distributed_sampler.h"
#include "runtime/error.h"

namespace tandem::testing {
namespace {

using nn::parallel::DistributedSampler;
using nn::parallel::DistributedSamplerOptions;

std::vector<std::vector<int64_t>> all_shards(int64_t n, int world, int64_t epoch, DistributedSamplerOptions o = {}) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, world, r, o);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

TEST(DistributedSampler, DivisibleDatasetCoveredExactlyOnce) {
  for (int world : {1, 2, 3, 4})
    for (int64_t epoch : {0, 1, 5}) {
      auto shards = all_shards(60, world, epoch);
      std::vector<int> seen(60, 0);
      for (auto& s : shards) {
        EXPECT_EQ(s.size(), static_cast<size_t>(60 / world));
        for (int64_t i : s) seen[static_cast<size_t>(i)] += 1;
      }
      for (int c : seen) EXPECT_EQ(c, 1) << "world " << world << " epoch " << epoch;
    }
}

TEST(DistributedSampler, PaddingRepeatsTheFirstIndices) {
  DistributedSampler s0(10, 4, 0);
  EXPECT_EQ(s0.num_samples(), 3);
  EXPECT_EQ(s0.total_size(), 12);
  auto g = s0.global_indices(0);
  ASSERT_EQ(g.size(), 12u);
  EXPECT_EQ(g[10], g[0]);
  EXPECT_EQ(g[11], g[1]);
  std::set<int64_t> distinct(g.begin(), g.end());
  EXPECT_EQ(distinct.size(), 10u);
}

TEST(DistributedSampler, DropLastNeverRepeats) {
  DistributedSamplerOptions o;
  o.drop_last = true;
  auto shards = all_shards(10, 4, 3, o);
  std::set<int64_t> seen;
  for (auto& s : shards) {
    EXPECT_EQ(s.size(), 2u);
    for (int64_t i : s) EXPECT_TRUE(seen.insert(i).second) << i << " seen twice";
  }
}

TEST(DistributedSampler, WorldLargerThanDataset) {
  auto shards = all_shards(3, 4, 0);
  for (auto& s : shards) EXPECT_EQ(s.size(), 1u);
}

TEST(DistributedSampler, EpochChangesThePermutationDeterministically) {
  DistributedSampler a(100, 2, 1), b(100, 2, 1);
  a.set_epoch(1);
  b.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  b.set_epoch(2);
  EXPECT_NE(a.indices(), b.indices());
  DistributedSamplerOptions seeded;
  seeded.seed = 7;
  DistributedSampler c(100, 2, 1, seeded);
  c.set_epoch(1);
  EXPECT_NE(a.indices(), c.indices());
}

TEST(DistributedSampler, OneRankIsTheRandomSampler) {
  DistributedSamplerOptions o;
  o.seed = 3;
  DistributedSampler s(50, 1, 0, o);
  data::RandomSampler r(50, 3);
  EXPECT_EQ(s.indices(4), r.indices(4));
}

TEST(DistributedSampler, NoShuffleDealsRoundRobin) {
  DistributedSamplerOptions o;
  o.shuffle = false;
  DistributedSampler s(7, 3, 1, o);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 0}));  // padded with index 0
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), ValueError);
  EXPECT_THROW(DistributedSampler(10, 0, 0), ValueError);
  DistributedSampler s(10, 2, 0);
  EXPECT_THROW(s.set_epoch(-1), ValueError);
}

TEST(EvalShard, CoversEverySampleOnceWithoutPadding) {
  for (int world : {1, 2, 3, 4}) {
    int64_t next = 0;
    for (int r = 0; r < world; ++r) {
      auto s = nn::parallel::eval_shard(10, world, r);
      EXPECT_EQ(s.begin, next);
      EXPECT_GE(s.size(), 10 / world);
      EXPECT_LE(s.size(), 10 / world + 1);
      next = s.end;
    }
    EXPECT_EQ(next, 10);
  }
}

}  // namespace
}  // namespace tandem::testing
