// decide_mode: the table of --mode auto (tests/loop/test_mode_auto.cpp spells it out case by case).
#include "train/mode_auto.h"

#include <fmt/format.h>

#include "comm/communicator.h"
#include "comm/launcher_env.h"
#include "runtime/device_query.h"
#include "runtime/error.h"

namespace tandem::train {

namespace {
// Which launcher's variables gave the job size, in the words of its users.
std::string launcher_words(const std::string& launcher) {
  if (launcher == "openmpi") return "Open MPI";
  if (launcher == "pmi") return "a PMI launcher (MPICH's mpiexec)";
  if (launcher == "slurm") return "srun";
  if (launcher == "pmix") return "a PMIx launcher";
  return launcher;
}
}  // namespace

ModeDecision decide_mode(const ModeInputs& in) {
  ModeDecision d;
  const ParallelMode mode = in.configured;
  TANDEM_CHECK(enum_name(mode)[0] != '?', "--mode must be auto, single, dp or ddp, got {}", static_cast<int>(mode));
  if (mode != ParallelMode::Auto) {
    TANDEM_CHECK(mode != ParallelMode::DDP || in.have_mpi,
                 "--mode ddp: this build of tandem has no MPI, so it cannot start a distributed run; build with "
                 "TANDEM_MPI=ON, or use --mode single or dp");
    d.mode = mode;
    d.devices = in.devices;
    d.reason = fmt::format("--mode {} given", enum_name(mode));
    return d;
  }
  const bool gpu_wanted = in.device == "auto" || in.device.rfind("cuda", 0) == 0;
  if (in.launcher_world > 1) {
    if (!in.have_mpi) {
      d.mode = ParallelMode::Single;
      d.reason = fmt::format("launched with {} ranks, but this build has no MPI", in.launcher_world);
      d.warning = fmt::format("--mode auto: launched with {} ranks by a build without MPI: each process trains "
                              "alone on its own device (single); build with TANDEM_MPI=ON for ddp",
                              in.launcher_world);
      return d;
    }
    d.mode = ParallelMode::DDP;
    d.reason = fmt::format("launched with {} ranks{}: one process per rank{}", in.launcher_world,
                           in.launcher.empty() ? "" : " by " + launcher_words(in.launcher),
                           gpu_wanted && in.gpus > 0 ? " (each on a GPU of its node where it has one)" : "");
    return d;
  }
  if (!in.devices.empty()) {
    d.mode = ParallelMode::DP;
    d.devices = in.devices;
    d.reason = fmt::format("one process, --devices {}", in.devices);
    return d;
  }
  if (gpu_wanted && in.gpus >= 2) {
    d.mode = ParallelMode::DP;
    for (int i = 0; i < in.gpus; ++i) d.devices += fmt::format("{}cuda:{}", i ? "," : "", i);
    d.reason = fmt::format("one process (not launched by mpirun) and {} GPUs: DataParallel over them", in.gpus);
    return d;
  }
  d.mode = ParallelMode::Single;
  d.reason = in.gpus == 1 && gpu_wanted ? "one process and one GPU"
             : !gpu_wanted && in.gpus >= 2 ? fmt::format("one process on --device {}", in.device)
                                           : "one process (not launched by mpirun), no more than one device";
  return d;
}

ModeDecision decide_mode_here(const TrainConfig& cfg) {
  ModeInputs in;
  in.configured = cfg.mode;
  const comm::LauncherEnv env = comm::launcher_env();
  in.launcher_world = env.world_size;
  if (env.launcher != "none") in.launcher = env.launcher;
  in.gpus = cuda::device_count();
  in.device = cfg.device;
  in.devices = cfg.devices;
#ifdef TANDEM_HAVE_MPI
  in.have_mpi = true;
#else
  in.have_mpi = false;
#endif
  return decide_mode(in);
}

}  // namespace tandem::train
