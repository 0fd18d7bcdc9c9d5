// What the launcher tells a process before MPI is initialised: the job's size, the process's rank,
// its node's ranks and its place among them, and its node, read from the environment that Open
// MPI's mpirun, MPICH's Hydra (PMI), Slurm's srun or a PMIx launcher gives each rank.
#pragma once
#include <functional>
#include <string>

namespace tandem::comm {

struct LauncherEnv {
  std::string launcher = "none";  // whose variables gave the rank: openmpi, pmi, slurm, pmix or none
  int world_size = 1;
  int rank = 0;
  int local_size = 1;  // ranks of the job on this node
  int local_rank = 0;
  int node = -1;       // this node's index in the job (Slurm's SLURM_NODEID); -1 where no launcher says
};

// Each figure from the first of these that is set (a launcher that starts the ranks itself comes
// before Slurm: under `sbatch` + `mpirun` every rank inherits the batch step's or the daemon step's
// SLURM_PROCID, the same on every rank of a node, while mpirun's own variables are right):
//   world size  OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_STEP_NUM_TASKS*, PMIX_SIZE
//   rank        OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID*, PMIX_RANK
//   local size  OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_STEP_TASKS_PER_NODE* at SLURM_NODEID
//   local rank  OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID*
//   node        SLURM_NODEID*
// * only inside a step that srun started (SLURM_STEP_NUM_TASKS is set): a batch script's own shell
//   has SLURM_PROCID=0 and SLURM_NTASKS of the whole allocation, and a program it runs without srun
//   is one process, not rank 0 of many. Sizes below 1 read as 1, ranks below 0 as 0.
using EnvLookup = std::function<const char*(const char*)>;
LauncherEnv read_launcher_env(const EnvLookup& getenv);
LauncherEnv launcher_env();  // this process's environment

// The task count of node `node` in Slurm's compressed per-node list ("2(x3),1": nodes 0-2 run 2
// tasks, node 3 runs 1); 0 when the list is malformed or shorter.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

}  // namespace tandem::comm
