// --mode: how the ranks or devices share the training (train/mode_auto.h chooses for auto,
// train/parallel_setup.h sets the chosen one up).
#pragma once
#include <utility>

#include "runtime/enum_names.h"

namespace tandem::train {

enum class ParallelMode {
  Auto,    // mode_auto.h decides from the launcher, the GPUs and --devices
  Single,  // one process, one device
  DDP,     // one process per rank under mpirun: DistributedDataParallel
  DP,      // one process over several devices: DataParallel
};

}  // namespace tandem::train

namespace tandem {
template <>
struct EnumNames<train::ParallelMode> {
  static constexpr std::pair<train::ParallelMode, const char*> words[] = {{train::ParallelMode::Auto, "auto"},
                                                                          {train::ParallelMode::Single, "single"},
                                                                          {train::ParallelMode::DDP, "ddp"},
                                                                          {train::ParallelMode::DP, "dp"}};
};
}  // namespace tandem
