// The launcher's view of the job from the environment (comm/launcher_env.h): Open MPI's mpirun,
// MPICH's Hydra, srun, PMIx, and their precedence when a rank inherits several (sbatch + mpirun),
// from made-up environments rather than this process's.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "comm/launcher_env.h"

using tandem::comm::LauncherEnv;
using tandem::comm::read_launcher_env;
using tandem::comm::slurm_tasks_on_node;
using Env = std::map<std::string, std::string>;

namespace {
LauncherEnv read(const Env& env) {
  return read_launcher_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
// An srun step of 6 tasks over 3 nodes of 2, as srun gives task 3 (node 1, its second task).
const Env kSrun = {{"SLURM_STEP_NUM_TASKS", "6"}, {"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}, {"SLURM_NTASKS", "6"}};
}  // namespace

TEST(LauncherEnv, NoLauncher) {
  const LauncherEnv e = read({});
  EXPECT_EQ(e.launcher, "none");
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.local_size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.node, -1);
}

TEST(LauncherEnv, OpenMpi) {
  const LauncherEnv e = read({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node, -1);
}

TEST(LauncherEnv, HydraPmi) {
  const LauncherEnv e = read({{"PMI_SIZE", "3"}, {"PMI_RANK", "2"}, {"MPI_LOCALNRANKS", "3"}, {"MPI_LOCALRANKID", "2"}});
  EXPECT_EQ(e.launcher, "pmi");
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.local_size, 3);
  EXPECT_EQ(e.local_rank, 2);
}

TEST(LauncherEnv, Srun) {
  const LauncherEnv e = read(kSrun);
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node, 1);
}

// srun --mpi=pmix: PMIx and Slurm agree; Slurm's are read first and give the node too.
TEST(LauncherEnv, SrunWithPmix) {
  Env env = kSrun;
  env["PMIX_RANK"] = "3";
  const LauncherEnv e = read(env);
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.node, 1);
  EXPECT_EQ(read({{"PMIX_RANK", "5"}, {"PMIX_SIZE", "8"}}).launcher, "pmix");
  EXPECT_EQ(read({{"PMIX_RANK", "5"}, {"PMIX_SIZE", "8"}}).world_size, 8);
}

// A batch script's own shell (sbatch without srun): SLURM_PROCID=0 and the allocation's SLURM_NTASKS,
// but no step: a program it runs alone is one process, not rank 0 of 8.
TEST(LauncherEnv, BatchScriptWithoutSrunIsNoLauncher) {
  const LauncherEnv e = read({{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"},
                              {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_ID", "42"}});
  EXPECT_EQ(e.launcher, "none");
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_size, 1);
  EXPECT_EQ(e.node, -1);
}

// sbatch + mpirun: Open MPI's ranks inherit the Slurm step of the daemon that started them (one
// task per node: SLURM_PROCID is the node's index on every rank there). mpirun's variables win;
// Slurm's node index stays (it is the node's).
TEST(LauncherEnv, MpirunInsideSlurmReadsMpirun) {
  Env env = {{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},
             {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "6"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}};
  LauncherEnv e = read(env);
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.rank, 6);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.node, 1);
  // The same under MPICH's mpiexec (Hydra inside the allocation).
  env = {{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},
         {"PMI_SIZE", "8"}, {"PMI_RANK", "5"}, {"MPI_LOCALNRANKS", "4"}, {"MPI_LOCALRANKID", "1"}};
  e = read(env);
  EXPECT_EQ(e.launcher, "pmi");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.local_rank, 1);
}

TEST(LauncherEnv, BadValuesClamp) {
  const LauncherEnv e = read({{"OMPI_COMM_WORLD_SIZE", "0"}, {"OMPI_COMM_WORLD_RANK", "-3"}, {"MPI_LOCALNRANKS", "x"}});
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.local_size, 1);
  // An empty variable counts as unset.
  EXPECT_EQ(read({{"OMPI_COMM_WORLD_SIZE", ""}, {"PMI_SIZE", "3"}, {"PMI_RANK", "1"}}).world_size, 3);
}

TEST(LauncherEnv, SlurmTasksPerNode) {
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), 0);
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("3,1,2", 2), 2);
  for (const char* bad : {"", "x", "2(3)", "2(x)", "2(x3", "2(x3)y", "2x"})
    EXPECT_EQ(slurm_tasks_on_node(bad, 0), 0) << bad;
  // srun's step with a malformed list keeps local size 1.
  Env env = kSrun;
  env["SLURM_STEP_TASKS_PER_NODE"] = "garbage";
  EXPECT_EQ(read(env).local_size, 1);
}
