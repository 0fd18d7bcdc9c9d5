// tandem-serve's Slurm launcher without a cluster (slurm.h): the server's settings checked (a
// partition or time limit that could carry anything else is refused), scontrol's one-line job
// records read, Slurm's states sorted into pending, running and ended. The cluster itself:
// tests/slurm (ctest -L slurm).
#include <string>

#include <gtest/gtest.h>

#include "apps/tandem-serve/slurm.h"
#include "runtime/error.h"

using namespace tandem::serve;

TEST(SlurmOptions, AcceptsSlurmsForms) {
  for (const char* t : {"", "60", "30:00", "2:00:00", "1-12", "1-12:30", "1-12:30:00", "UNLIMITED"}) {
    SlurmOptions o;
    o.time_limit = t;
    o.partition = "gpu-a100,debug";
    EXPECT_NO_THROW(validate_slurm_options(o)) << t;
  }
}

TEST(SlurmOptions, RefusesAnythingElse) {
  for (const char* p : {"debug;rm -rf /", "a b", "--wrap=x", "a,,b", "$(id)", "part\n"}) {
    SlurmOptions o;
    o.partition = p;
    EXPECT_THROW(validate_slurm_options(o), tandem::ValueError) << p;
  }
  for (const char* t : {"1h", "-5", "1:2:3:4", "60 --wrap=x"}) {
    SlurmOptions o;
    o.time_limit = t;
    EXPECT_THROW(validate_slurm_options(o), tandem::ValueError) << t;
  }
  SlurmOptions o;
  o.mpi = "pmix --x";
  EXPECT_THROW(validate_slurm_options(o), tandem::ValueError);
  o.mpi = "pmix";
  o.gpus_per_node = -1;
  EXPECT_THROW(validate_slurm_options(o), tandem::ValueError);
}

TEST(SlurmJobInfo, ReadsScontrolsLine) {
  const SlurmJobInfo i = parse_scontrol_job(
      "JobId=12 JobName=tandem-serve-3 UserId=root(0) JobState=PENDING Reason=Resources Dependency=(null) "
      "ExitCode=0:0 NodeList=(null) BatchHost=vm\n");
  EXPECT_EQ(i.known, SlurmJobInfo::Known::Yes);
  EXPECT_EQ(i.state, "PENDING");
  EXPECT_EQ(i.reason, "Resources");
  EXPECT_EQ(i.exit_code, "0:0");
  const SlurmJobInfo r = parse_scontrol_job("JobId=13 JobState=RUNNING Reason=None ExitCode=0:0 NodeList=node[1-2]");
  EXPECT_EQ(r.nodes, "node[1-2]");
  EXPECT_EQ(parse_scontrol_job("garbage").known, SlurmJobInfo::Known::Unreachable);
}

TEST(SlurmJobInfo, SortsStates) {
  for (const char* s : {"PENDING", "CONFIGURING", "REQUEUED"}) {
    EXPECT_TRUE(slurm_state_pending(s)) << s;
    EXPECT_FALSE(slurm_state_final(s)) << s;
  }
  for (const char* s : {"RUNNING", "COMPLETING", "SUSPENDED"}) {
    EXPECT_FALSE(slurm_state_pending(s)) << s;
    EXPECT_FALSE(slurm_state_final(s)) << s;
  }
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})
    EXPECT_TRUE(slurm_state_final(s)) << s;
}
