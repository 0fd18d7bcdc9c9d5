// An MPI-aware GoogleTest main: MPI_Init_thread(MULTIPLE), run, combine the ranks' results, finalise.
// Only rank 0 prints progress; other ranks print failures only.
#include <mpi.h>

#include <gtest/gtest.h>

#include "tests/comm/mpi_test_env.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) ::testing::GTEST_FLAG(brief) = true;  // before Init: it picks the printer
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  tandem::comm::test::release_communicators();  // before MPI_Finalize
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
