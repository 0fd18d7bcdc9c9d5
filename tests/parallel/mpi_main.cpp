// MPI-aware GoogleTest main for tests/parallel: initialises MPI (thread-multiple: the communicator
// has its own progress thread), lets only rank 0 print the full report (other ranks print their
// failures, prefixed with the rank), and makes every rank exit non-zero when any rank failed.
#include <mpi.h>

#include <cstdio>

#include <gtest/gtest.h>

#include "tests/parallel/parallel_util.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  tandem::testing::release_world();  // the communicator's thread must stop before MPI_Finalize
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}

namespace tandem::testing {
std::shared_ptr<comm::Communicator>& world_slot() {
  static std::shared_ptr<comm::Communicator> w;
  return w;
}
}  // namespace tandem::testing
