// tandem-train's thread count: the rule that shares a node's CPUs among its ranks, and where
// apply_threads takes the count from (--threads, OMP_NUM_THREADS, the launcher's local size).
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "train/threads.h"
#include "comm/communicator.h"

namespace tandem::train {
namespace {

TEST(Threads, NodeCpusSharedAmongItsRanks) {
  EXPECT_EQ(threads_per_rank(2, 2, 2), 1);    // two unbound ranks on two cores
  EXPECT_EQ(threads_per_rank(32, 32, 4), 8);  // unbound: the node split four ways
  EXPECT_EQ(threads_per_rank(16, 32, 4), 8);  // bound to a socket of 16, two ranks a socket
  EXPECT_EQ(threads_per_rank(1, 32, 4), 1);   // bound to one core
  EXPECT_EQ(threads_per_rank(8, 8, 16), 1);   // more ranks than CPUs: one each, never zero
  EXPECT_EQ(threads_per_rank(8, 8, 1), 8);
  EXPECT_EQ(threads_per_rank(8, 8, 0), 8);    // an unknown size counts as one rank
}

// Sets (or, with nullopt, unsets) an environment variable for one scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Threads, ApplyTakesFlagThenEnvironmentThenLauncher) {
  const int saved = omp_get_max_threads();
  ScopedEnv omp("OMP_NUM_THREADS", std::nullopt), ompi("OMPI_COMM_WORLD_LOCAL_SIZE", std::nullopt),
      mpich("MPI_LOCALNRANKS", std::nullopt);
  EXPECT_EQ(comm::launcher_local_size(), 1);

  ThreadChoice c = apply_threads(3);
  EXPECT_EQ(c.count, 3);
  EXPECT_EQ(c.reason, "--threads");

  {
    ScopedEnv local("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    EXPECT_EQ(comm::launcher_local_size(), 2);
    c = apply_threads(0);
    const int node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    EXPECT_EQ(c.count, threads_per_rank(omp_get_num_procs(), node, 2));
    EXPECT_NE(c.reason.find("shared by its 2 ranks"), std::string::npos) << c.reason;

    ScopedEnv set("OMP_NUM_THREADS", "1");  // the user's own setting wins over the launcher's size
    omp_set_num_threads(saved);
    c = apply_threads(0);
    EXPECT_EQ(c.count, saved);
    EXPECT_EQ(c.reason, "OMP_NUM_THREADS");
  }
  {
    ScopedEnv local("MPI_LOCALNRANKS", "4");
    EXPECT_EQ(comm::launcher_local_size(), 4);
  }
  omp_set_num_threads(saved);
}

// The job size read from the launcher's variables, never below 1.
TEST(Threads, LauncherWorldSize) {
  ScopedEnv ompi("OMPI_COMM_WORLD_SIZE", std::nullopt), pmi("PMI_SIZE", std::nullopt), pmix("PMIX_SIZE", std::nullopt);
  EXPECT_EQ(comm::launcher_world_size(), 1);
  {
    ScopedEnv size("PMI_SIZE", "6");
    EXPECT_EQ(comm::launcher_world_size(), 6);
  }
  ScopedEnv bad("OMPI_COMM_WORLD_SIZE", "0");
  EXPECT_EQ(comm::launcher_world_size(), 1);
}

}  // namespace
}  // namespace tandem::train
