// --mode auto's decision table: (configured mode, launcher world size, GPUs seen, --device,
// --devices, MPI in the build) -> mode, devices, and whether it warns; plus the explicit-ddp error.
#include <gtest/gtest.h>

#include "train/mode_auto.h"

using namespace tandem;
using namespace tandem::train;

namespace {

struct Case {
  ModeInputs in;  // configured, launcher world, GPUs, --device, --devices, MPI in the build
  ParallelMode mode;
  const char* chosen_devices;
  bool warns;
};

const Case kTable[] = {
    // configured world gpus device  devices          mpi    -> mode     devices              warns
    {{ParallelMode::Auto, 1, 0, "auto", "", true, ""}, ParallelMode::Single, "", false},          // a laptop
    {{ParallelMode::Auto, 1, 0, "auto", "", true, ""}, ParallelMode::Single, "", false},              // empty reads as auto
    {{ParallelMode::Auto, 1, 1, "auto", "", true, ""}, ParallelMode::Single, "", false},          // one GPU
    {{ParallelMode::Auto, 1, 2, "auto", "", true, ""}, ParallelMode::DP, "cuda:0,cuda:1", false},  // a workstation with 2 GPUs
    {{ParallelMode::Auto, 1, 4, "cuda", "", true, ""}, ParallelMode::DP, "cuda:0,cuda:1,cuda:2,cuda:3", false},
    {{ParallelMode::Auto, 1, 4, "cpu", "", true, ""}, ParallelMode::Single, "", false},           // --device cpu: no dp over GPUs
    {{ParallelMode::Auto, 1, 0, "auto", "cpu:0,cpu:1", true, ""}, ParallelMode::DP, "cpu:0,cpu:1", false},  // --devices implies dp
    {{ParallelMode::Auto, 2, 0, "auto", "", true, ""}, ParallelMode::DDP, "", false},             // mpirun -np 2 on CPUs
    {{ParallelMode::Auto, 8, 8, "auto", "", true, ""}, ParallelMode::DDP, "", false},             // mpirun, a GPU per rank
    {{ParallelMode::Auto, 4, 2, "auto", "", true, ""}, ParallelMode::DDP, "", false},             // more ranks than GPUs: still ddp
    {{ParallelMode::Auto, 2, 0, "auto", "", false, ""}, ParallelMode::Single, "", true},          // no MPI in the build: fall back
    {{ParallelMode::Single, 4, 2, "auto", "", true, ""}, ParallelMode::Single, "", false},        // explicit modes are kept
    {{ParallelMode::DDP, 1, 0, "auto", "", true, ""}, ParallelMode::DDP, "", false},
    {{ParallelMode::DP, 1, 0, "auto", "cpu:0,cpu:1", true, ""}, ParallelMode::DP, "cpu:0,cpu:1", false},
};

}  // namespace

TEST(ModeAuto, DecisionTable) {
  for (const Case& c : kTable) {
    const ModeInputs& in = c.in;
    const ModeDecision d = decide_mode(in);
    const std::string where = fmt::format("--mode {}, world {}, {} GPUs, --device {}, --devices '{}', mpi {}",
                                          enum_name(in.configured), in.launcher_world, in.gpus, in.device, in.devices,
                                          in.have_mpi);
    EXPECT_EQ(d.mode, c.mode) << where;
    EXPECT_EQ(d.devices, c.chosen_devices) << where;
    EXPECT_EQ(!d.warning.empty(), c.warns) << where;
    EXPECT_FALSE(d.reason.empty()) << where;
  }
}

TEST(ModeAuto, ExplicitDdpWithoutMpiIsAClearError) {
  ModeInputs in;
  in.configured = ParallelMode::DDP;
  in.launcher_world = 2;
  in.have_mpi = false;
  try {
    decide_mode(in);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("no MPI"), std::string::npos) << e.what();
  }
}

TEST(ModeAuto, ReasonsSayWhy) {
  ModeInputs in;
  in.launcher_world = 2;
  EXPECT_NE(decide_mode(in).reason.find("launched with 2 ranks"), std::string::npos);
  in.launcher = "slurm";
  EXPECT_NE(decide_mode(in).reason.find("launched with 2 ranks by srun: one process per rank"), std::string::npos)
      << decide_mode(in).reason;
  in.launcher_world = 1;
  in.gpus = 2;
  EXPECT_NE(decide_mode(in).reason.find("2 GPUs"), std::string::npos);
}
