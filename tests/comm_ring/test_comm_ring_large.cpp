// The ring's large-buffer paths under mpirun (1-4 ranks, oversubscribed): sizes around the
// default 256 KiB segment, the 1 MiB cross-memory-attach threshold and the 8 MiB non-temporal
// all-gather threshold, odd counts, in place (all-reduce) and not (reduce-scatter, all-gather).
// Results must equal the exact values and be bitwise those of MPI point-to-point (the same sum
// order through another transport) on every rank.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstring>

#include "tests/comm/comm_test_util.h"
#include "tests/comm/mpi_test_env.h"

namespace tandem::comm::test {
namespace {

using Algo = Options::Algo;
constexpr int64_t kUncachedMin = 8 << 20;  // comm/ring.cpp kUncachedMinBytes

// f32 all-reduce of count random elements through `shm` and through point-to-point: bitwise equal,
// identical on every rank; and the half-integer values of comm_test_util exact.
void check_against_p2p(Communicator& shm, int64_t count, ReduceOp op) {
  Communicator& p2p = world(Algo::Ring, 0, /*shared_memory=*/false);
  const int n = shm.size(), r = shm.rank();
  auto a = random_floats(count, 1234u + static_cast<uint32_t>(r));  // differ per rank: sums round
  auto b = a;
  shm.allreduce(a.data(), count, DType::f32, op)->wait();
  p2p.allreduce(b.data(), count, DType::f32, op)->wait();
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "count " << count;
  ASSERT_TRUE(same_on_all_ranks(a.data(), a.size() * 4)) << "count " << count;
  auto exact = make_buffer(DType::f32, rank_values(DType::f32, r, count));
  shm.allreduce(exact.data(), count, DType::f32, op)->wait();
  ASSERT_EQ(to_doubles(DType::f32, exact.data(), count), expected_reduce(DType::f32, op, n, count)) << count;
}

TEST(CommRingLarge, AroundTheDefaultSegment) {
  Communicator& c = world(Algo::Ring, 0);
  const int64_t n = c.size(), seg = (256 << 10) / 4;  // chunks of exactly one segment, and one off
  for (int64_t count : {n * seg - 1, n * seg, n * seg + 1, 3 * n * seg + 5}) check_against_p2p(c, count, ReduceOp::Sum);
}

TEST(CommRingLarge, AroundTheCmaThreshold) {
  // 1 MiB segments are read by cross-memory attach where permitted; one element less goes by slots.
  for (int64_t seg_bytes : {int64_t(1) << 20, (int64_t(1) << 20) - 4}) {
    Communicator& c = world(Algo::Ring, seg_bytes);
    const int64_t n = c.size(), seg = seg_bytes / 4;
    for (int64_t count : {n * seg - 1, n * seg + 7}) check_against_p2p(c, count, ReduceOp::Sum);
  }
}

TEST(CommRingLarge, AroundTheUncachedAllGather) {
  Communicator& c = world(Algo::Ring, 0);
  for (int64_t count : {kUncachedMin / 4 - 1, kUncachedMin / 4, kUncachedMin / 4 + 13})
    check_against_p2p(c, count, ReduceOp::Sum);
  check_against_p2p(c, kUncachedMin / 4 + 1, ReduceOp::Avg);
  // A wider dtype and another op over the same path.
  const int n = c.size(), r = c.rank();
  const int64_t count = kUncachedMin / 8 + 3;
  auto buf = make_buffer(DType::i64, rank_values(DType::i64, r, count));
  c.allreduce(buf.data(), count, DType::i64, ReduceOp::Max)->wait();
  ASSERT_EQ(to_doubles(DType::i64, buf.data(), count), expected_reduce(DType::i64, ReduceOp::Max, n, count));
}

TEST(CommRingLarge, ReduceScatterAndAllGatherNotInPlace) {
  Communicator& c = world(Algo::Ring, 0);
  const int n = c.size(), r = c.rank();
  // Per-rank counts whose total crosses the all-gather's 8 MiB threshold, odd.
  for (int64_t per : {kUncachedMin / 4 / n - 1, kUncachedMin / 4 / n + 3}) {
    const int64_t total = per * n;
    auto send = make_buffer(DType::f32, rank_values(DType::f32, r, total));
    std::vector<char> got(static_cast<size_t>(per) * 4);
    c.reduce_scatter(send.data(), got.data(), per, DType::f32, ReduceOp::Sum)->wait();
    ASSERT_EQ(to_doubles(DType::f32, got.data(), per), expected_reduce(DType::f32, ReduceOp::Sum, n, per, per * r));
    std::vector<char> all(static_cast<size_t>(total) * 4);
    c.allgather(got.data(), all.data(), per, DType::f32)->wait();
    ASSERT_EQ(to_doubles(DType::f32, all.data(), total), expected_reduce(DType::f32, ReduceOp::Sum, n, total));
    ASSERT_TRUE(same_on_all_ranks(all.data(), all.size()));
  }
}

}  // namespace
}  // namespace tandem::comm::test
