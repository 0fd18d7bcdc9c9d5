// The hierarchical all-reduce under mpirun, on several nodes: the namespace hosts of tests/nodes, or
// one host whose ranks TANDEM_TEST_RANKS_PER_NODE groups into nodes. The result is bitwise the
// documented order of additions (computed here from every rank's values), identical on every rank,
// for odd sizes and f32, f64, bf16, f16; avg, max and integers against the exact values; the bytes
// sent across nodes are the rail ring's, and fewer than the flat ring's; reduce_scatter_chunks keeps
// allreduce's bits. Skips where the job is not several nodes of several ranks each.
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "runtime/env_settings.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/mpi_test_env.h"

namespace tandem::comm::test {
namespace {

using Algo = Options::Algo;

// Where each rank is: node index (nodes numbered by their first rank) and local rank. Worked out
// here, apart from the library: TANDEM_TEST_RANKS_PER_NODE's runs of ranks, or MPI's nodes.
struct Place {
  int nodes = 1, per_node = 1;
  std::vector<int> node_of, local_of;  // by world rank
  int world_rank(int node, int local) const {
    for (size_t r = 0; r < node_of.size(); ++r)
      if (node_of[r] == node && local_of[r] == local) return static_cast<int>(r);
    return -1;
  }
};

Place place() {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  if (const std::optional<double> per = env::number("TANDEM_TEST_RANKS_PER_NODE"))
    MPI_Comm_split(MPI_COMM_WORLD, rank / static_cast<int>(*per), rank, &node);
  else
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, first = rank;
  MPI_Comm_rank(node, &local);
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  Place p;
  std::vector<int> firsts(static_cast<size_t>(size));
  p.local_of.resize(static_cast<size_t>(size));
  MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgather(&local, 1, MPI_INT, p.local_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> ids = firsts;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int f : firsts) p.node_of.push_back(static_cast<int>(std::lower_bound(ids.begin(), ids.end(), f) - ids.begin()));
  p.nodes = static_cast<int>(ids.size());
  p.per_node = size / p.nodes;
  return p;
}

// Skips unless the job is several nodes of the same number (>= 2) of ranks.
#define SKIP_UNLESS_NODES(p)                                                                          \
  if ((p).nodes < 2 || (p).per_node < 2 || (p).nodes * (p).per_node != static_cast<int>((p).node_of.size())) \
    GTEST_SKIP() << "needs several nodes of several ranks (tests/nodes, or TANDEM_TEST_RANKS_PER_NODE)";

// Rank r's values: random, so that the order of additions shows in the bits.
std::vector<float> values(int r, int64_t count) { return random_floats(count, 1000u + static_cast<uint32_t>(r)); }

// The documented order, in f32 (what 16-bit types are summed in): element i lies in chunk c of the
// node's L chunks; each node sums its ranks from local rank c around (local c, c+1, ..., c-1); the
// chunk is cut in N sub-chunks, and sub-chunk d sums the nodes' sums from node d around.
std::vector<float> reference(const Place& p, int64_t count, DType dtype) {
  const int L = p.per_node, N = p.nodes;
  std::vector<std::vector<int>> at(static_cast<size_t>(N), std::vector<int>(static_cast<size_t>(L)));
  for (int m = 0; m < N; ++m)
    for (int l = 0; l < L; ++l) at[size_t(m)][size_t(l)] = p.world_rank(m, l);
  std::vector<std::vector<float>> x(p.node_of.size());
  for (size_t r = 0; r < x.size(); ++r) {
    x[r] = values(static_cast<int>(r), count);
    if (dtype != DType::f32) {  // what the rank holds in dtype, widened to f32
      std::vector<char> b(static_cast<size_t>(count) * dtype_size(dtype));
      convert_host(x[r].data(), DType::f32, b.data(), dtype, count);
      convert_host(b.data(), dtype, x[r].data(), DType::f32, count);
    }
  }
  std::vector<float> out(static_cast<size_t>(count));
  for (int c = 0; c < L; ++c) {
    const int64_t lo = count * c / L, hi = count * (c + 1) / L, len = hi - lo;
    for (int d = 0; d < N; ++d)
      for (int64_t i = lo + len * d / N; i < lo + len * (d + 1) / N; ++i) {
        auto node_sum = [&](int m) {
          float s = x[size_t(at[size_t(m)][size_t(c)])][size_t(i)];
          for (int k = 1; k < L; ++k) s = s + x[size_t(at[size_t(m)][size_t((c + k) % L)])][size_t(i)];
          return s;
        };
        float s = node_sum(d);
        for (int k = 1; k < N; ++k) s = s + node_sum((d + k) % N);
        out[static_cast<size_t>(i)] = s;
      }
  }
  return out;
}

Communicator& hier() { return world(Algo::Hierarchical, 0); }

TEST(CommHier, AutoChoosesTheHierarchy) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  const MpiTraffic t = mpi_traffic(world(Algo::Auto, 0));
  EXPECT_EQ(t.allreduce, "hierarchical");
  EXPECT_EQ(t.nodes, p.nodes);
  EXPECT_EQ(t.ranks_per_node, p.per_node);
  EXPECT_EQ(mpi_traffic(world(Algo::Ring, 0)).allreduce, "ring");
}

bool doubling_possible(int n) { return n > 2 && (n & (n - 1)) == 0; }

// Nodes of different sizes (3 ranks as nodes of 2 and 1): auto keeps the flat ring, and forcing the
// hierarchy is an error that says why, on every rank.
TEST(CommHier, UnevenNodesKeepTheFlatRing) {
  const Place p = place();
  if (p.nodes < 2 || p.nodes * p.per_node == static_cast<int>(p.node_of.size()))
    GTEST_SKIP() << "needs nodes of different sizes (TANDEM_TEST_RANKS_PER_NODE=2 on 3 ranks)";
  EXPECT_EQ(mpi_traffic(world(Algo::Auto, 0)).allreduce, "ring");
  Options o;
  o.algo = Algo::Hierarchical;
  try {
    make_mpi_communicator(MPI_COMM_WORLD, o);
    ADD_FAILURE() << "hierarchical on nodes of different sizes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the same number of ranks on every node"), std::string::npos) << e.what();
  }
}

// Sizes below, at and above L * N, odd, and over several 256 KiB segments.
TEST(CommHier, SumIsTheDocumentedOrderBitwiseOnEveryRank) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  if (doubling_possible(p.per_node) || doubling_possible(p.nodes))
    GTEST_SKIP() << "the reference has no recursive doubling (4, 8, ... ranks per node or nodes)";
  Communicator& c = hier();
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t count : {1, 3, 7, 13, 127, 4099, 100003, 300007}) {
      std::vector<float> mine = values(c.rank(), count);
      std::vector<char> buf(static_cast<size_t>(count) * dtype_size(t));
      convert_host(mine.data(), DType::f32, buf.data(), t, count);
      c.allreduce(buf.data(), count, t, ReduceOp::Sum)->wait();
      std::vector<float> want = reference(p, count, t);
      std::vector<char> want_bytes(buf.size());
      convert_host(want.data(), DType::f32, want_bytes.data(), t, count);  // rounded once, at the end
      ASSERT_EQ(std::memcmp(buf.data(), want_bytes.data(), buf.size()), 0)
          << dtype_name(t) << " count " << count << ": not the documented order of additions";
      ASSERT_TRUE(same_on_all_ranks(buf.data(), buf.size())) << dtype_name(t) << " count " << count;
      // A rerun gives the same bits.
      convert_host(mine.data(), DType::f32, buf.data(), t, count);
      c.allreduce(buf.data(), count, t, ReduceOp::Sum)->wait();
      ASSERT_EQ(std::memcmp(buf.data(), want_bytes.data(), buf.size()), 0) << dtype_name(t) << " rerun";
    }
}

// Other bits than the flat ring's: another order of additions (which also shows that the test
// above tells orders apart).
TEST(CommHier, NotTheFlatRingsBits) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  const int64_t count = 100003;
  std::vector<float> a = values(world().rank(), count), b = a;
  hier().allreduce(a.data(), count, DType::f32, ReduceOp::Sum)->wait();
  world(Algo::Ring, 0).allreduce(b.data(), count, DType::f32, ReduceOp::Sum)->wait();
  EXPECT_NE(a, b);
}

TEST(CommHier, EveryDtypeAndOpExact) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  Communicator& c = hier();
  for (DType t : all_dtypes())
    for (ReduceOp op : all_ops())
      for (int64_t count : {0, 1, 5, 4099}) {
        auto buf = make_buffer(t, rank_values(t, c.rank(), count));
        c.allreduce(buf.data(), count, t, op)->wait();
        ASSERT_EQ(to_doubles(t, buf.data(), count), expected_reduce(t, op, c.size(), count))
            << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
      }
}

// The rail ring's bytes exactly: in each phase a rank sends every sub-chunk of its node chunk but
// one (reduce-scatter: all but sub-chunk q+1, all-gather: all but q+2, q its node's number).
TEST(CommHier, CrossNodeBytesAreTheRailsAndFewerThanTheFlatRings) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  Communicator& h = hier();
  Communicator& flat = world(Algo::Ring, 0);
  const int L = p.per_node, N = p.nodes, r = h.rank();
  const int64_t count = 1000003;
  std::vector<float> buf = values(r, count);
  const uint64_t h0 = mpi_traffic(h).cross_node_bytes;
  h.allreduce(buf.data(), count, DType::f32, ReduceOp::Sum)->wait();
  const uint64_t hier_bytes = mpi_traffic(h).cross_node_bytes - h0;
  {  // (the chunks are far above recursive doubling's 32 KiB)
    const int c = Communicator::owned_chunk(p.local_of[static_cast<size_t>(r)], L);
    const int64_t len = count * (c + 1) / L - count * c / L;
    auto sub = [&](int d) { return len * ((d % N) + 1) / N - len * (d % N) / N; };
    const int q = p.node_of[static_cast<size_t>(r)];
    EXPECT_EQ(hier_bytes, 4u * static_cast<uint64_t>(2 * len - sub(q + 1) - sub(q + 2)));
  }
  const uint64_t f0 = mpi_traffic(flat).cross_node_bytes;
  buf = values(r, count);
  flat.allreduce(buf.data(), count, DType::f32, ReduceOp::Sum)->wait();
  const uint64_t flat_bytes = mpi_traffic(flat).cross_node_bytes - f0;
  uint64_t totals[2] = {hier_bytes, flat_bytes};
  MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  // The rails: 2 (N-1)/N of the buffer leaves each node. The flat ring crosses at least N times
  // (once per node, ranks in node order), each crossing 2 (P-1)/P of the buffer.
  const double bytes = 4.0 * count, P = L * N;
  EXPECT_NEAR(double(totals[0]), 2.0 * (N - 1) * bytes, 16.0 * N * L);
  EXPECT_GE(double(totals[1]), N * 2.0 * (P - 1) / P * bytes - 8.0 * P * N);
  EXPECT_LT(totals[0], totals[1]);
}

// ZeRO's half: the owned chunk after reduce_scatter_chunks is bitwise allreduce's under the hierarchy.
TEST(CommHier, ReduceScatterChunksKeepsAllreduceBits) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  Communicator& c = hier();
  const int n = c.size(), r = c.rank();
  for (int64_t count : {5, 97, 8193, 100003}) {
    std::vector<float> a = values(r, count), z = a;
    c.allreduce(a.data(), count, DType::f32, ReduceOp::Avg)->wait();
    c.reduce_scatter_chunks(z.data(), count, DType::f32, ReduceOp::Avg)->wait();
    const int own = Communicator::owned_chunk(r, n);
    const int64_t lo = Communicator::chunk_begin(count, n, own), hi = Communicator::chunk_begin(count, n, own + 1);
    ASSERT_EQ(std::memcmp(a.data() + lo, z.data() + lo, static_cast<size_t>(hi - lo) * 4), 0) << "count " << count;
    c.allgather_chunks(z.data(), count, DType::f32)->wait();
    ASSERT_EQ(a, z) << "count " << count;
  }
}

// make_buffer under the hierarchy is plain memory (no shared window): its all-reduce takes the
// hierarchy like any buffer, so DDP's buckets get the same bits as other memory.
TEST(CommHier, MakeBufferTakesTheHierarchyToo) {
  const Place p = place();
  SKIP_UNLESS_NODES(p);
  Communicator& c = hier();
  const int64_t count = 40001;
  Tensor b = c.make_buffer(count, DType::f32);
  std::vector<float> plain = values(c.rank(), count);
  std::memcpy(b.data_ptr(), plain.data(), plain.size() * 4);
  c.allreduce(b.data_ptr(), count, DType::f32, ReduceOp::Sum)->wait();
  c.allreduce(plain.data(), count, DType::f32, ReduceOp::Sum)->wait();
  ASSERT_EQ(std::memcmp(b.data_ptr(), plain.data(), plain.size() * 4), 0);
  ASSERT_EQ(plain, reference(p, count, DType::f32));
}

}  // namespace
}  // namespace tandem::comm::test
