// --mode auto (the default): single, dp or ddp chosen from the launcher's world size and the GPUs
// this process sees, with the reason said; a pure decision (decide_mode) and its inputs read from
// the process (decide_mode_here).
#pragma once
#include <string>

#include "train/train_config.h"

namespace tandem::train {

struct ModeInputs {
  ParallelMode configured = ParallelMode::Auto;  // --mode
  int launcher_world = 1;           // the launcher's job size (comm/launcher_env.h; 1: no launcher)
  int gpus = 0;                     // CUDA devices this process sees
  std::string device = "auto";      // --device
  std::string devices;              // --devices
  bool have_mpi = true;             // the build has MPI (ddp is possible at all)
  std::string launcher;             // whose variables gave launcher_world: openmpi, pmi, slurm, pmix ("": unsaid)
};

struct ModeDecision {
  ParallelMode mode = ParallelMode::Single;  // never Auto
  std::string devices;  // dp: the devices to use ("cuda:0,cuda:1", or --devices)
  std::string reason;   // one line for the log and the done record
  std::string warning;  // non-empty: a fallback the user should know about
};

// Launched with several ranks: ddp (one process per rank; per GPU where each has one). Not launched,
// with --devices: dp over them. Not launched, two or more GPUs and --device auto|cuda: dp over every
// GPU (one process). Otherwise single. Launched with several ranks by a build without MPI: single,
// with a warning (each process trains alone). An explicit --mode is kept, but --mode ddp in a build
// without MPI is a ValueError.
ModeDecision decide_mode(const ModeInputs& in);

// decide_mode on this process: the launcher's variables, cuda::device_count(), the build.
ModeDecision decide_mode_here(const TrainConfig& cfg);

}  // namespace tandem::train
