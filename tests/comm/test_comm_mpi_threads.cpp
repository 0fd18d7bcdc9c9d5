// Ranks that share a node share its CPUs when a communicator is made for them (runtime/threads.h):
// OpenMP's default (every CPU, in every rank) becomes each rank's share, unless the program chose a
// count (tandem::set_num_threads) or OMP_NUM_THREADS is set.
#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/mpi/mpi_comm.h"
#include "runtime/threads.h"

namespace tandem::comm::test {
namespace {

TEST(MpiThreads, CommunicatorSharesTheNodesCpusUnlessTheProgramChose) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  const std::string kept = env ? env : "";
  const int saved = omp_get_max_threads();
  ::unsetenv("OMP_NUM_THREADS");
  set_num_threads(0);
  omp_set_num_threads(5);  // OpenMP's default on a node of 5 CPUs, in every rank
  const int local = local_size(MPI_COMM_WORLD), node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  auto c = make_mpi_communicator(MPI_COMM_WORLD);
  EXPECT_EQ(omp_get_max_threads(), local > 1 ? threads_per_rank(omp_get_num_procs(), node, local) : 5);

  set_num_threads(3);  // the program's choice stays
  c = make_mpi_communicator(MPI_COMM_WORLD);
  EXPECT_EQ(omp_get_max_threads(), 3);

  c.reset();  // no communicator thread alive while the environment changes
  set_num_threads(0);  // so does the user's OMP_NUM_THREADS
  ::setenv("OMP_NUM_THREADS", "7", 1);
  omp_set_num_threads(7);
  c = make_mpi_communicator(MPI_COMM_WORLD);
  EXPECT_EQ(omp_get_max_threads(), 7);
  EXPECT_THROW(set_num_threads(-1), ValueError);

  c.reset();
  if (env) ::setenv("OMP_NUM_THREADS", kept.c_str(), 1);
  else ::unsetenv("OMP_NUM_THREADS");
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace tandem::comm::test
