// Faults under mpirun: a rank that skips a collective gives the others a deadline error naming
// the collective, its number and the missing rank (not a hang); the desync check names the rank
// that called a different collective. Each test uses its own communicator (errors break one).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "tests/comm/mpi_test_env.h"
#include "runtime/env_settings.h"

namespace tandem::comm::test {
namespace {

int world_rank() { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int n = 1; MPI_Comm_size(MPI_COMM_WORLD, &n); return n; }

TEST(CommMpiFaults, SkippedCollectiveGivesDeadlineErrorNotHang) {
  const int n = world_size(), r = world_rank();
  if (n == 1) GTEST_SKIP() << "needs 2 ranks: one skips a collective";
  {
    Options o;
    o.timeout_s = 1.0;
    o.segment_bytes = 4096;
    auto c = make_mpi_communicator(MPI_COMM_WORLD, o);
    std::vector<float> v(1000, 1.0f);
    c->allreduce(v.data(), 1000, DType::f32, ReduceOp::Sum)->wait();  // #1: everyone
    const int skipper = n - 1;
    if (r != skipper) {
      std::string msg;
      try {
        c->allreduce(v.data(), 1000, DType::f32, ReduceOp::Sum)->wait();  // #2: the skipper is absent
      } catch (const CommError& e) {
        msg = e.what();
      }
      EXPECT_NE(msg.find("allreduce (collective #2) missed its deadline"), std::string::npos) << msg;
      EXPECT_NE(msg.find(fmt::format("missing ranks (never arrived at #2): {};", skipper)), std::string::npos)
          << msg;
      // The communicator is now unusable, and says so at once.
      EXPECT_THROW(c->barrier()->wait(), CommError);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFaults, DesyncCheckNamesTheRankThatDiffers) {
  const int n = world_size(), r = world_rank();
  if (n == 1) GTEST_SKIP() << "needs 2 ranks";
  Options o;
  o.timeout_s = 20;
  o.debug_desync = true;
  auto c = make_mpi_communicator(MPI_COMM_WORLD, o);
  std::vector<float> v(64, 1.0f);
  c->allreduce(v.data(), 64, DType::f32, ReduceOp::Sum)->wait();  // agreeing calls pass
  const int odd = n - 1;
  WorkPtr w = r == odd ? c->broadcast(v.data(), 64, DType::f32, 0)
                       : c->allreduce(v.data(), 64, DType::f32, ReduceOp::Sum);
  std::string msg;
  try {
    w->wait();
  } catch (const CommError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(fmt::format("ranks {} differ", odd)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("rank {}: #2 broadcast(count=64", odd)), std::string::npos) << msg;
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFaults, DesyncFromEnvironmentCatchesCountMismatch) {
  const int n = world_size(), r = world_rank();
  if (n == 1) GTEST_SKIP() << "needs 2 ranks";
  std::shared_ptr<Communicator> c;
  {
    env::ScopedValue desync("TANDEM_DEBUG_DESYNC", "1");
    Options o;
    o.timeout_s = 20;
    c = make_mpi_communicator(MPI_COMM_WORLD, o);
  }
  std::vector<double> v(100, 1.0);
  const int64_t count = r == 0 ? 100 : 99;  // rank 0 is the odd one out (for n == 2, a tie: rank 0 wins)
  std::string msg;
  try {
    c->allreduce(v.data(), count, DType::f64, ReduceOp::Sum)->wait();
  } catch (const CommError& e) {
    msg = e.what();
  }
  const std::string odd = n == 2 ? "1" : "0";
  EXPECT_NE(msg.find("ranks " + odd + " differ"), std::string::npos) << msg;
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace tandem::comm::test
