// The MPI communicator under mpirun: every collective and dtype against values computed from the
// ranks and against MPI_Allreduce; odd sizes; bitwise equality across ranks and reruns; a split
// communicator; async issue of several collectives.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "tests/comm/comm_test_util.h"
#include "tests/comm/mpi_test_env.h"

namespace tandem::comm::test {
namespace {

using Algo = Options::Algo;

void check_allreduce_all(Communicator& c, const std::vector<int64_t>& sizes) {
  const int n = c.size(), r = c.rank();
  for (DType t : all_dtypes())
    for (ReduceOp op : all_ops())
      for (int64_t count : sizes) {
        auto buf = make_buffer(t, rank_values(t, r, count));
        c.allreduce(buf.data(), count, t, op)->wait();
        auto got = to_doubles(t, buf.data(), count);
        auto want = expected_reduce(t, op, n, count);
        ASSERT_EQ(got, want) << "allreduce " << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
      }
}

TEST(CommMpi, AllreduceEveryDtypeOpAndSizeRing) { check_allreduce_all(world(Algo::Ring), test_sizes()); }
TEST(CommMpi, AllreduceRingDefaultSegment) { check_allreduce_all(world(Algo::Ring, 0), {0, 1, 13, 100003}); }
TEST(CommMpi, AllreduceEveryDtypeOpAndSizeRingOverPointToPoint) {
  check_allreduce_all(world(Algo::Ring, 4096, /*shared_memory=*/false), {0, 1, 3, 127, 4099, 100003});
}
// Large messages: 1 MiB segments move by cross-memory attach where permitted, smaller ones through
// shared-memory slots (both in one channel with 4 ranks); all must agree with point-to-point.
TEST(CommMpi, AllreduceLargeMessages) {
  Communicator& big = world(Algo::Ring, 1 << 20);
  Communicator& p2p = world(Algo::Ring, 0, /*shared_memory=*/false);
  const int n = big.size(), r = big.rank();
  const int64_t count = 1500007;
  for (DType t : {DType::f32, DType::bf16, DType::i64})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      auto a = make_buffer(t, rank_values(t, r, count));
      auto b = a;
      big.allreduce(a.data(), count, t, op)->wait();
      p2p.allreduce(b.data(), count, t, op)->wait();
      ASSERT_EQ(to_doubles(t, a.data(), count), expected_reduce(t, op, n, count)) << dtype_name(t);
      ASSERT_EQ(a, b) << dtype_name(t);
    }
  std::vector<float> v(static_cast<size_t>(count) * n, float(r));
  std::vector<float> got(static_cast<size_t>(count));
  big.reduce_scatter(v.data(), got.data(), count, DType::f32, ReduceOp::Sum)->wait();
  EXPECT_EQ(got.front(), float(n * (n - 1) / 2));
  EXPECT_EQ(got.back(), float(n * (n - 1) / 2));
  std::vector<float> all(static_cast<size_t>(count) * n);
  big.allgather(got.data(), all.data(), count, DType::f32)->wait();
  EXPECT_EQ(all[static_cast<size_t>(count) * n - 1], float(n * (n - 1) / 2));
  std::vector<int32_t> bc(3000000, r);
  big.broadcast(bc.data(), int64_t(bc.size()), DType::i32, n - 1)->wait();
  EXPECT_EQ(bc[2999999], n - 1);
}

TEST(CommMpi, AllreduceEveryDtypeOpNative) { check_allreduce_all(world(Algo::Native), {0, 1, 7, 4099}); }

TEST(CommMpi, AllreduceMatchesMpiAllreduce) {
  Communicator& c = world();
  for (int64_t count : {1, 1000, 65537, 262144 + 3}) {
    auto v = random_floats(count, 1234u + c.rank());
    std::vector<float> ref(v.size());
    MPI_Allreduce(v.data(), ref.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    auto v2 = v;
    c.allreduce(v.data(), count, DType::f32, ReduceOp::Sum)->wait();
    world(Algo::Ring, 4096, false).allreduce(v2.data(), count, DType::f32, ReduceOp::Sum)->wait();
    EXPECT_EQ(v, v2) << "shared-memory and point-to-point rings add in the same order";
    for (int64_t i = 0; i < count; ++i)
      ASSERT_NEAR(v[i], ref[i], 1e-5f * (1 + std::abs(ref[i]))) << "count " << count << " i " << i;
    std::vector<int64_t> iv(static_cast<size_t>(count)), iref(iv.size());
    for (int64_t i = 0; i < count; ++i) iv[i] = (i * 2654435761LL + c.rank() * 97) % 1000003;
    MPI_Allreduce(iv.data(), iref.data(), static_cast<int>(count), MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    c.allreduce(iv.data(), count, DType::i64, ReduceOp::Max)->wait();
    ASSERT_EQ(iv, iref);
    std::vector<int32_t> jv(static_cast<size_t>(count)), jref(jv.size());
    for (int64_t i = 0; i < count; ++i) jv[i] = int32_t((i * 7919 + c.rank() * 31) % 65521) - 30000;
    MPI_Allreduce(jv.data(), jref.data(), static_cast<int>(count), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    c.allreduce(jv.data(), count, DType::i32, ReduceOp::Sum)->wait();
    ASSERT_EQ(jv, jref);
    std::vector<double> dv(v.size()), dref(v.size());
    for (int64_t i = 0; i < count; ++i) dv[i] = std::sin(double(i) + c.rank());
    MPI_Allreduce(dv.data(), dref.data(), static_cast<int>(count), MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    c.allreduce(dv.data(), count, DType::f64, ReduceOp::Min)->wait();
    ASSERT_EQ(dv, dref);  // min is exact
    for (int64_t i = 0; i < count; ++i) dv[i] = std::sin(double(i) + c.rank());
    MPI_Allreduce(dv.data(), dref.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    c.allreduce(dv.data(), count, DType::f64, ReduceOp::Sum)->wait();
    for (int64_t i = 0; i < count; ++i) ASSERT_NEAR(dv[i], dref[i], 1e-12 * (1 + std::abs(dref[i])));
  }
}

TEST(CommMpi, BitwiseIdenticalAcrossRanksAndReruns) {
  for (int variant = 0; variant < 3; ++variant) {
    Communicator& c = variant == 0 ? world(Algo::Ring, 4096)
                      : variant == 1 ? world(Algo::Ring, 0)
                                     : world(Algo::Ring, 4096, /*shared_memory=*/false);
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64})
      for (int64_t count : {1000, 100003}) {  // small: recursive doubling on 4 ranks; large: ring
        auto v = random_floats(count, 99u + 17u * c.rank());
        std::vector<double> dv(v.begin(), v.end());
        auto a = make_buffer(t, dv), b = make_buffer(t, dv);
        c.allreduce(a.data(), count, t, ReduceOp::Sum)->wait();
        c.allreduce(b.data(), count, t, ReduceOp::Sum)->wait();
        EXPECT_EQ(a, b) << "rerun differs, " << dtype_name(t) << " count " << count;
        EXPECT_TRUE(same_on_all_ranks(a.data(), a.size())) << "ranks differ, " << dtype_name(t) << " count " << count;
      }
  }
}

TEST(CommMpi, ReduceScatterEveryDtypeOpAndSize) {
  for (Algo algo : {Algo::Ring, Algo::Native}) {
    Communicator& c = world(algo);
    const int n = c.size(), r = c.rank();
    for (DType t : all_dtypes())
      for (ReduceOp op : all_ops())
        for (int64_t count : {0, 1, 3, 7, 1024, 4099}) {
          auto send = make_buffer(t, rank_values(t, r, count * n));
          std::vector<char> recv(static_cast<size_t>(count) * dtype_size(t) + 1);
          c.reduce_scatter(send.data(), recv.data(), count, t, op)->wait();
          auto got = to_doubles(t, recv.data(), count);
          auto want = expected_reduce(t, op, n, count, count * r);
          ASSERT_EQ(got, want) << "reduce_scatter " << dtype_name(t) << " " << reduce_op_name(op) << " count "
                               << count << " algo " << int(algo);
        }
  }
}

TEST(CommMpi, AllgatherEveryDtypeAndSize) {
  for (Algo algo : {Algo::Ring, Algo::Native}) {
    Communicator& c = world(algo);
    const int n = c.size(), r = c.rank();
    for (DType t : all_dtypes())
      for (int64_t count : {0, 1, 2, 7, 1000, 4099}) {
        auto send = make_buffer(t, rank_values(t, r, count));
        std::vector<char> recv(static_cast<size_t>(count * n) * dtype_size(t) + 1);
        c.allgather(send.data(), recv.data(), count, t)->wait();
        auto got = to_doubles(t, recv.data(), count * n);
        for (int q = 0; q < n; ++q) {
          auto want = to_doubles(t, make_buffer(t, rank_values(t, q, count)).data(), count);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + count * q))
              << "allgather block " << q << " " << dtype_name(t) << " count " << count;
        }
      }
  }
}

TEST(CommMpi, BroadcastFromEveryRoot) {
  for (Algo algo : {Algo::Ring, Algo::Native}) {
    Communicator& c = world(algo);
    for (int root = 0; root < c.size(); ++root)
      for (DType t : {DType::f32, DType::f16, DType::i64})
        for (int64_t count : {0, 1, 5, 4099, 100003}) {
          auto buf = make_buffer(t, rank_values(t, c.rank(), count));
          c.broadcast(buf.data(), count, t, root)->wait();
          ASSERT_EQ(to_doubles(t, buf.data(), count), to_doubles(t, make_buffer(t, rank_values(t, root, count)).data(), count))
              << "broadcast root " << root << " count " << count;
        }
  }
}

TEST(CommMpi, SendRecvAroundTheRing) {
  for (bool shm : {true, false}) {
    Communicator& c = world(Algo::Ring, 4096, shm);
    const int n = c.size(), r = c.rank();
    if (n == 1) GTEST_SKIP() << "send/recv needs 2 ranks";
    const int64_t count = 5000;
    std::vector<int32_t> out(count, r), in(count, -1);
    // Even ranks send first, odd ranks receive first: no cycle of waiting sends.
    if (r % 2 == 0) {
      c.send(out.data(), count, DType::i32, (r + 1) % n)->wait();
      c.recv(in.data(), count, DType::i32, (r - 1 + n) % n)->wait();
    } else {
      c.recv(in.data(), count, DType::i32, (r - 1 + n) % n)->wait();
      c.send(out.data(), count, DType::i32, (r + 1) % n)->wait();
    }
    EXPECT_EQ(in, std::vector<int32_t>(count, (r - 1 + n) % n)) << "shared memory " << shm;
  }
}

TEST(CommMpi, BarrierAndTensorConveniences) {
  Communicator& c = world();
  c.barrier()->wait();
  world(Algo::Native).barrier()->wait();
  Tensor t = Tensor::full({3, 5}, c.rank() + 1.0, DType::f32);
  c.allreduce(t, ReduceOp::Sum)->wait();
  const double sum = c.size() * (c.size() + 1) / 2.0;
  for (float x : t.to_vector<float>()) EXPECT_EQ(x, sum);
  Tensor b = Tensor::full({4}, c.rank(), DType::bf16);
  c.broadcast(b, c.size() - 1)->wait();
  for (float x : b.to_vector<float>()) EXPECT_EQ(x, c.size() - 1);
  Tensor g = Tensor::empty({c.size() * 2}, DType::i32);
  c.allgather(Tensor::full({2}, c.rank(), DType::i32), g)->wait();
  auto gv = g.to_vector<int32_t>();
  for (int q = 0; q < c.size(); ++q) EXPECT_EQ(gv[2 * q], q);
  Tensor rs = Tensor::empty({2}, DType::f32);
  c.reduce_scatter(Tensor::ones({c.size() * 2}, DType::f32), rs, ReduceOp::Avg)->wait();
  for (float x : rs.to_vector<float>()) EXPECT_EQ(x, 1.0f);
  Tensor wrong = Tensor::empty({3}, DType::i32);
  EXPECT_THROW(c.allgather(Tensor::full({2}, 1, DType::i32), wrong), ValueError);
}

TEST(CommMpi, ManyCollectivesInFlightThenWaitInReverse) {
  Communicator& c = world();
  const int n = c.size();
  std::vector<std::vector<float>> bufs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 8; ++k) bufs.emplace_back(1000 + 777 * k, float(c.rank() + k));
  for (auto& b : bufs) works.push_back(c.allreduce(b.data(), int64_t(b.size()), DType::f32, ReduceOp::Sum));
  for (int k = 7; k >= 0; --k) works[k]->wait();
  for (int k = 0; k < 8; ++k) {
    EXPECT_TRUE(works[k]->is_completed());
    EXPECT_EQ(bufs[k].front(), float(n * (n - 1) / 2 + n * k));
    EXPECT_EQ(bufs[k].back(), float(n * (n - 1) / 2 + n * k));
  }
}

TEST(CommMpi, SplitCommunicatorTwoGroups) {
  int wr = 0, wn = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm_size(MPI_COMM_WORLD, &wn);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &half);
  {
    Options o;
    o.timeout_s = 60;
    o.segment_bytes = 4096;
    auto c = make_mpi_communicator(half, o);
    int expect_size = wn / 2 + (wr % 2 == 0 ? wn % 2 : 0);
    EXPECT_EQ(c->size(), expect_size);
    // Each group sums its world ranks; the two groups run at the same time.
    std::vector<int64_t> v(10007, wr);
    c->allreduce(v.data(), int64_t(v.size()), DType::i64, ReduceOp::Sum)->wait();
    int64_t want = 0;
    for (int q = wr % 2; q < wn; q += 2) want += q;
    EXPECT_EQ(v.front(), want);
    EXPECT_EQ(v.back(), want);
    EXPECT_EQ(local_size(half), c->size());
    EXPECT_EQ(local_rank(half), c->rank());
    c->barrier()->wait();
  }
  MPI_Comm_free(&half);
}

}  // namespace
}  // namespace tandem::comm::test
