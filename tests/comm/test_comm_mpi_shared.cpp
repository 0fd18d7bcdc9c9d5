// make_buffer memory under mpirun: on one node it is shared by the ranks and an allreduce over it
// runs the direct algorithm (each rank reads and writes its peers' buffers in place). It must give
// the ring's bits exactly (same summation order), leave the rest of the buffer alone, keep the
// order of collectives in flight, fall back to the ring for 16-bit types, and fail on every rank
// when the ranks disagree about the buffer or the range.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/comm/comm_test_util.h"
#include "runtime/env_settings.h"
#include "tests/comm/mpi_test_env.h"

namespace tandem::comm::test {
namespace {

// Fills n elements of t at p: random floats (so the summation order shows in the bits), or the
// small integers of rank_values.
void fill(DType t, void* p, int64_t n, int rank, uint32_t salt) {
  std::vector<double> v = rank_values(t, rank, n);
  if (is_floating(t)) {
    auto f = random_floats(n, salt + 7919u * static_cast<uint32_t>(rank));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f[static_cast<size_t>(i)] * (1.0 + i % 5);
  }
  convert_host(v.data(), DType::f64, p, t, n);
}

TEST(CommMpiShared, MakeBufferIsZeroedHostMemory) {
  Communicator& c = world();
  Tensor b = c.make_buffer(1000, DType::f64);
  EXPECT_EQ(b.numel(), 1000);
  EXPECT_EQ(b.dtype(), DType::f64);
  EXPECT_TRUE(b.device().is_host_addressable());
  for (double x : b.to_vector<double>()) ASSERT_EQ(x, 0.0);
  EXPECT_EQ(c.make_buffer(0, DType::f32).numel(), 0);
}

// Larger than any buffer the other tests take, so only this test's buffers can fit.
constexpr int64_t kLarge = int64_t(3) << 20;

TEST(CommMpiShared, MakeBufferReusesReleasedBuffersZeroed) {
  Communicator& c = world();
  if (c.size() == 1) GTEST_SKIP() << "one rank: make_buffer is plain memory";
  void* first = nullptr;
  {
    Tensor a = c.make_buffer(kLarge, DType::f32);
    a.fill_(7.0);
    first = a.data_ptr();
  }
  Tensor b = c.make_buffer(kLarge - 1000, DType::f32);  // fits in a's buffer, which is free again
  EXPECT_EQ(b.data_ptr(), first);
  for (float x : b.to_vector<float>()) ASSERT_EQ(x, 0.0f);
  Tensor d = c.make_buffer(kLarge - 1000, DType::f32);  // b still holds it
  EXPECT_NE(d.data_ptr(), first);
  // A loop that takes and drops a buffer (a DDP built again and again) keeps reusing one: the
  // smallest free one that fits (d's is too small).
  b = Tensor();
  d = Tensor();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(c.make_buffer(kLarge, DType::f32).data_ptr(), first) << i;
}

TEST(CommMpiShared, BuffersTakenAndDroppedInALoopReduceCorrectly) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  Tensor kept;  // every third buffer outlives its iteration, so reuse sees buffers of every state
  for (int i = 0; i < 300; ++i) {
    const int64_t count = 1000 + 4097 * (i % 3);
    Tensor t = c.make_buffer(count, DType::f32);
    for (float x : t.to_vector<float>()) ASSERT_EQ(x, 0.0f) << i;
    t.fill_(r + i);
    c.allreduce(t.data_ptr(), count, DType::f32, ReduceOp::Sum)->wait();
    std::vector<float> v = t.to_vector<float>();
    ASSERT_EQ(v.front(), n * i + n * (n - 1) / 2.0f) << i;
    ASSERT_EQ(v.back(), v.front()) << i;
    if (i % 3 == 0) kept = t;
  }
}

TEST(CommMpiShared, BufferHeldOnOneRankIsNotReusedOnAny) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  if (n == 1) GTEST_SKIP() << "needs 2 ranks";
  Tensor held = c.make_buffer(kLarge, DType::f32);
  void* old = held.data_ptr();
  if (r != 0) held = Tensor();  // free on every rank but rank 0
  Tensor next = c.make_buffer(kLarge, DType::f32);
  EXPECT_NE(next.data_ptr(), old);  // rank 0 still uses it: every rank takes another buffer ...
  fill(DType::f32, next.data_ptr(), kLarge, r, 3u);
  std::vector<float> plain = next.to_vector<float>();
  c.allreduce(next.data_ptr(), kLarge, DType::f32, ReduceOp::Sum)->wait();  // ... the same one
  c.allreduce(plain.data(), kLarge, DType::f32, ReduceOp::Sum)->wait();
  EXPECT_EQ(std::memcmp(next.data_ptr(), plain.data(), plain.size() * sizeof(float)), 0);
}

TEST(CommMpiShared, AllreduceGivesTheRingsBitsForEveryDtypeOpAndSize) {
  Communicator& c = world(Options::Algo::Ring, 0);
  const int n = c.size(), r = c.rank();
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64})
    for (ReduceOp op : all_ops())
      for (int64_t count : {1, 2, 3, 5, 4099, 100003}) {
        const size_t bytes = static_cast<size_t>(count) * dtype_size(t);
        Tensor shared = c.make_buffer(count, t);
        fill(t, shared.data_ptr(), count, r, static_cast<uint32_t>(count));
        std::vector<char> plain(static_cast<char*>(shared.data_ptr()), static_cast<char*>(shared.data_ptr()) + bytes);
        c.allreduce(shared.data_ptr(), count, t, op)->wait();
        c.allreduce(plain.data(), count, t, op)->wait();
        ASSERT_TRUE(same_on_all_ranks(shared.data_ptr(), bytes)) << dtype_name(t) << " count " << count;
        // Small buffers on 4 ranks take recursive doubling, another order, not the ring.
        const bool ring_order = n <= 2 || (n & (n - 1)) != 0 || bytes > 32 * 1024;
        if (ring_order) {
          ASSERT_EQ(std::memcmp(shared.data_ptr(), plain.data(), bytes), 0)
              << "direct and ring differ: " << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
        }
        // Exact expected values on the small integers.
        auto ints = rank_values(t, r, count);
        convert_host(ints.data(), DType::f64, shared.data_ptr(), t, count);
        c.allreduce(shared.data_ptr(), count, t, op)->wait();
        ASSERT_EQ(to_doubles(t, shared.data_ptr(), count), expected_reduce(t, op, n, count))
            << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
      }
}

TEST(CommMpiShared, SubRangeLeavesTheRestAlone) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  const int64_t total = 50000, off = 1234, count = 30011;
  Tensor b = c.make_buffer(total, DType::f32);
  float* p = static_cast<float*>(b.data_ptr());
  for (int64_t i = 0; i < total; ++i) p[i] = float(r * 1000 + i % 997);
  c.allreduce(p + off, count, DType::f32, ReduceOp::Sum)->wait();
  for (int64_t i = 0; i < total; ++i) {
    float want = float(r * 1000 + i % 997);
    if (i >= off && i < off + count) want = float(1000 * n * (n - 1) / 2 + n * (i % 997));
    ASSERT_EQ(p[i], want) << "i " << i;
  }
}

// Back-to-back all-reduces over two buffers, as DDP's buckets: a rank that finishes every piece
// of one moves on and publishes the next while a slower peer still checks the first. The peer must
// not mistake the new arrival for a mismatch (it once did, about once in 20000 collectives).
TEST(CommMpiShared, BackToBackOverTwoBuffersNeverMistakesTheNextArrival) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  Tensor a = c.make_buffer(1418, DType::f32), b = c.make_buffer(777, DType::f32);
  const int iterations = static_cast<int>(env::number("TANDEM_TEST_STRESS").value_or(3000));
  for (int i = 0; i < iterations; ++i) {
    Tensor& t = i % 2 ? b : a;
    t.fill_(r + 1);
    c.allreduce(t.data_ptr(), t.numel(), DType::f32, ReduceOp::Sum)->wait();
    ASSERT_EQ(t.to_vector<float>()[0], n * (n + 1) / 2.0f) << i;
  }
}

TEST(CommMpiShared, SixteenBitTypesFallBackToTheRing) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (DType t : {DType::bf16, DType::f16}) {
    const int64_t count = 7777;
    Tensor b = c.make_buffer(count, t);
    auto v = rank_values(t, r, count);
    convert_host(v.data(), DType::f64, b.data_ptr(), t, count);
    c.allreduce(b.data_ptr(), count, t, ReduceOp::Avg)->wait();
    ASSERT_EQ(to_doubles(t, b.data_ptr(), count), expected_reduce(t, ReduceOp::Avg, n, count)) << dtype_name(t);
  }
}

TEST(CommMpiShared, CollectivesInFlightMixedWithRingOnes) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<Tensor> shared;
  std::vector<std::vector<int64_t>> plain;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 6; ++k) {
    const int64_t count = 1000 + 7919 * k;
    if (k % 2 == 0) {
      shared.push_back(c.make_buffer(count, DType::i64));
      auto* p = static_cast<int64_t*>(shared.back().data_ptr());
      for (int64_t i = 0; i < count; ++i) p[i] = r + k + i;
      works.push_back(c.allreduce(p, count, DType::i64, ReduceOp::Sum));
    } else {
      plain.emplace_back(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) plain.back()[static_cast<size_t>(i)] = r * k - i;
      works.push_back(c.allreduce(plain.back().data(), count, DType::i64, ReduceOp::Max));
    }
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (size_t s = 0; s < shared.size(); ++s) {
    const int k = static_cast<int>(2 * s);
    const auto* p = static_cast<const int64_t*>(shared[s].data_ptr());
    for (int64_t i = 0; i < shared[s].numel(); ++i)
      ASSERT_EQ(p[i], int64_t(n) * (k + i) + int64_t(n) * (n - 1) / 2) << "buffer " << s << " i " << i;
  }
  for (size_t s = 0; s < plain.size(); ++s) {
    const int k = static_cast<int>(2 * s + 1);
    for (size_t i = 0; i < plain[s].size(); ++i) ASSERT_EQ(plain[s][i], int64_t(n - 1) * k - int64_t(i));
  }
}

// Each failing test makes a communicator of its own: the error leaves it unusable.
std::shared_ptr<Communicator> fresh_communicator() {
  Options o;
  o.timeout_s = 5;
  return make_mpi_communicator(MPI_COMM_WORLD, o);
}

TEST(CommMpiShared, RanksReducingDifferentRangesFailOnEveryRank) {
  const int r = world().rank();
  if (world().size() == 1) GTEST_SKIP() << "needs 2 ranks";
  {
    auto c = fresh_communicator();
    Tensor b = c->make_buffer(4096, DType::f32);
    float* p = static_cast<float*>(b.data_ptr());
    std::string msg;
    try {
      c->allreduce(p + (r == 0 ? 0 : 16), 1000, DType::f32, ReduceOp::Sum)->wait();
    } catch (const CommError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("every rank must reduce the same range of the same buffer"), std::string::npos) << msg;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiShared, PlainMemoryOnOneRankFailsEveryRankAtOnce) {
  const int r = world().rank();
  if (world().size() == 1) GTEST_SKIP() << "needs 2 ranks";
  {
    Options o;
    o.timeout_s = 120;  // far beyond the test's wait: the error must come from the mismatch
    auto c = make_mpi_communicator(MPI_COMM_WORLD, o);
    Tensor shared = c->make_buffer(5000, DType::f32);
    std::vector<float> plain(5000, 1.0f);
    void* mine = r == 0 ? static_cast<void*>(plain.data()) : shared.data_ptr();
    const auto t0 = std::chrono::steady_clock::now();
    std::string msg;
    try {
      c->allreduce(mine, 5000, DType::f32, ReduceOp::Sum)->wait();
    } catch (const CommError& e) {
      msg = e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(msg.find("memory that is not from make_buffer"), std::string::npos) << msg;
    EXPECT_NE(msg.find(r == 0 ? "this rank (0)" : "but rank 0 passes"), std::string::npos) << msg;
    EXPECT_LT(waited, 60.0);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiShared, SkippedCollectiveGivesDeadlineErrorNamingTheRank) {
  const int n = world().size(), r = world().rank();
  if (n == 1) GTEST_SKIP() << "needs 2 ranks: one skips a collective";
  {
    Options o;
    o.timeout_s = 1.0;
    auto c = make_mpi_communicator(MPI_COMM_WORLD, o);
    Tensor b = c->make_buffer(100000, DType::f32);
    c->allreduce(b.data_ptr(), b.numel(), DType::f32, ReduceOp::Sum)->wait();  // #1: everyone
    const int skipper = n - 1;
    if (r != skipper) {
      std::string msg;
      try {
        c->allreduce(b.data_ptr(), b.numel(), DType::f32, ReduceOp::Sum)->wait();  // #2: the skipper is absent
      } catch (const CommError& e) {
        msg = e.what();
      }
      EXPECT_NE(msg.find("allreduce (collective #2) missed its deadline"), std::string::npos) << msg;
      EXPECT_NE(msg.find("missing ranks (never arrived at #2): " + std::to_string(skipper) + ";"), std::string::npos)
          << msg;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiShared, MakeBufferOfDifferentSizesFailsOnEveryRank) {
  const int r = world().rank();
  if (world().size() == 1) GTEST_SKIP() << "needs 2 ranks";
  {
    auto c = fresh_communicator();
    std::string msg;
    try {
      c->make_buffer(r == 0 ? 100 : 200, DType::f32);
    } catch (const CommError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("every rank must ask for the same size"), std::string::npos) << msg;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace tandem::comm::test
