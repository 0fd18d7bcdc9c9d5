// setup_parallel: the mode switch behind tandem-train's --mode, --sync-bn, --bucket-cap-mb,
// --devices and --accumulation-steps.
#include "train/parallel_setup.h"

#include "comm/launcher_env.h"
#include "nn/parallel/sync_batch_norm.h"

namespace tandem::train {

using nn::parallel::DataParallel;

std::optional<DistributedDataParallel::NoSync> ParallelSetup::accumulation_scope(int64_t micro) {
  return no_sync_unless((micro + 1) % accumulation_steps == 0);
}

std::optional<DistributedDataParallel::NoSync> ParallelSetup::no_sync_unless(bool reduce) {
  if (!ddp || reduce) return std::nullopt;
  return ddp->no_sync();
}

void ParallelSetup::before_optimizer_step() const {
  if (ddp) ddp->finalize();
}

void ParallelSetup::before_evaluation() const {
  sync_params();  // the evaluation may run the bare model (EMA's weights swapped in)
  if (ddp && ddp->options().broadcast_buffers) ddp->sync_buffers();
}

void ParallelSetup::sync_params() const {
  if (ddp) ddp->sync_params();
}

ParallelSetup setup_parallel(const ParallelConfig& given, std::shared_ptr<Module> model,
                             std::shared_ptr<comm::Communicator> comm) {
  TANDEM_CHECK(model != nullptr, "setup_parallel: no model given");
  ParallelConfig config = given;
  if (config.mode == ParallelMode::Auto)  // a program's: its communicator says (tandem-train decides before)
    config.mode = comm && comm->size() > 1 ? ParallelMode::DDP : ParallelMode::Single;
  TANDEM_CHECK(config.mode == ParallelMode::Single || config.mode == ParallelMode::DDP || config.mode == ParallelMode::DP,
               "setup_parallel: mode must be auto, single, ddp or dp, got {}", static_cast<int>(config.mode));
  TANDEM_CHECK(config.accumulation_steps >= 1, "--accumulation-steps must be >= 1, got {}", config.accumulation_steps);
  TANDEM_CHECK(!config.sync_bn || config.mode == ParallelMode::DDP,
               "--sync-bn needs --mode ddp (it synchronises BatchNorm statistics across processes)");
  TANDEM_CHECK(config.mode == ParallelMode::DP || config.devices.empty(), "--devices is for --mode dp");
  ParallelSetup s;
  s.inner = model;
  s.accumulation_steps = config.accumulation_steps;
  s.device_reason = config.device_reason;
  TANDEM_CHECK(config.mode != ParallelMode::DP || config.device.is_cpu(),
               "--mode dp places its replicas on --devices; the model must start on the CPU, not {}", config.device.str());
  if (config.mode == ParallelMode::Single) {
    s.model = model;
  } else if (config.mode == ParallelMode::DP) {
    const auto devices = nn::parallel::parse_devices(config.devices.empty() ? "cpu:0,cpu:1" : config.devices);
    model->to(devices[0]);  // the model starts on the CPU; DataParallel keeps replica 0 on the first device
    s.model = std::make_shared<DataParallel>(model, devices);
  } else {
    const bool given = comm != nullptr;
    s.comm = given ? std::move(comm) : comm::make_world_communicator(config.device);
    if (!given) {
      // The launcher's count against MPI's: srun without a PMI plugin that this MPI speaks starts N
      // processes that each initialise MPI alone, in a world of 1, and N copies of the run would
      // train side by side, each writing the same checkpoints.
      const comm::LauncherEnv launched = comm::launcher_env();
      TANDEM_CHECK(launched.world_size <= 1 || launched.world_size == s.comm->size(),
                   "the launcher ({}'s variables) started {} ranks but MPI's world has {}: this MPI did not hear "
                   "of the others; under srun give --mpi=pmix or --mpi=pmi2 (srun --mpi=list), or launch with "
                   "this MPI's mpirun/mpiexec",
                   launched.launcher, launched.world_size, s.comm->size());
    }
    if (config.sync_bn) {
      // With find_unused_parameters, ranks may launch DDP buckets at different points relative to
      // SyncBatchNorm's collectives: give SyncBatchNorm a communicator of its own then.
      auto bn_comm = config.ddp.find_unused_parameters && !given ? comm::make_world_communicator(config.device) : s.comm;
      s.inner = nn::parallel::convert_sync_batchnorm(model, bn_comm);
      model = s.inner;
    }
    auto ddp = std::make_shared<DistributedDataParallel>(model, s.comm, config.ddp);
    s.ddp = ddp.get();
    s.model = ddp;
  }
  return s;
}

}  // namespace tandem::train
