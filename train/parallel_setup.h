// The apps' data-parallel switch: --mode single|ddp|dp, --devices, --sync-bn, --bucket-cap-mb and
// --accumulation-steps wired to the library's DistributedDataParallel, DataParallel and
// SyncBatchNorm: one function that wraps the model (and makes the MPI communicator for ddp), and
// the no_sync scope for gradient accumulation. The Trainer then runs forward on
// ParallelSetup::model, builds its optimizer on model->parameters() (the same tensors as the bare
// model's) and keeps checkpoints on ParallelSetup::inner (names without a "module." prefix).
//
//   ParallelConfig pc{cfg.mode, cfg.devices, cfg.sync_bn, cfg.accumulation_steps, cfg.ddp};
//   ParallelSetup ps = setup_parallel(pc, train::make_model(cfg));      // collective in ddp mode
//   World world{ps.comm};                                             // rank/size for the sampler
//   ... per optimizer step, for micro in [0, accumulation_steps):
//   {
//     auto scope = ps.accumulation_scope(micro);                      // no_sync but for the last
//     Tensor loss = ops::cross_entropy(ps.model->forward(x), y) * (1.0 / accumulation_steps);
//     loss.backward();
//   }
//   ps.before_optimizer_step();  optimizer.step();  optimizer.zero_grad();
//   ... evaluation: ps.before_evaluation() (all ranks), then forwards under NoGradGuard through
//   ps.model or ps.inner: local, so ranks may run different numbers of batches.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/ddp_options.h"
#include "train/parallel_mode.h"

namespace tandem::train {

using nn::Module;
using nn::parallel::DistributedDataParallel;

struct ParallelConfig {
  // auto: ddp when setup_parallel is given a communicator of several ranks, else single
  // (tandem-train decides auto itself first: mode_auto.h, which also knows dp).
  ParallelMode mode = ParallelMode::Auto;
  std::string devices;          // dp: "cpu:0,cpu:1" or "cuda:0,cuda:1" (empty: cpu:0,cpu:1)
  bool sync_bn = false;         // ddp: BatchNorm -> SyncBatchNorm
  int64_t accumulation_steps = 1;
  nn::parallel::DDPOptions ddp;  // ddp: buckets, unused parameters, bucket views, static graph
  Device device = kCPU;         // single/ddp: where the model lives (ddp on cuda:N talks NCCL)
  std::string device_reason{};  // why `device` (--device auto), for the done record
};

struct ParallelSetup {
  std::shared_ptr<comm::Communicator> comm;  // ddp: the world; null for single and dp
  std::shared_ptr<Module> model;             // forward / parameters() / train() / eval() go here
  std::shared_ptr<Module> inner;             // the bare model (state_dict, checkpoints)
  DistributedDataParallel* ddp = nullptr;    // ddp mode only (owned by `model`)
  int64_t accumulation_steps = 1;
  std::string device_reason;                 // ParallelConfig::device_reason

  int rank() const { return comm ? comm->rank() : 0; }
  int world_size() const { return comm ? comm->size() : 1; }
  // Held across forward and backward of micro-batch `micro` (counted from 0 within an optimizer
  // step): in ddp mode every micro-batch but the last accumulates without communicating.
  std::optional<DistributedDataParallel::NoSync> accumulation_scope(int64_t micro);
  // The same with the decision made by the caller: `reduce` is true for the micro-batch right
  // before an optimizer step (e.g. also for the last, shorter group of an epoch).
  std::optional<DistributedDataParallel::NoSync> no_sync_unless(bool reduce);
  // Before optimizer.step(): in ddp mode, throws the clear unused-parameter error if the last
  // backward did not reduce every gradient (gradients are already averaged otherwise).
  void before_optimizer_step() const;
  // Before evaluating (collective in ddp mode): every rank gets rank 0's BN running statistics.
  // Evaluation forwards under NoGradGuard are then local (DDP's forward communicates only when its
  // backward will be reduced), so ranks may evaluate different numbers of batches.
  void before_evaluation() const;
  // ZeRO: waits for the parameters' all-gather of the last optimizer step (DDP::sync_params); call it
  // before reading or writing the parameters outside a forward through `model` (EMA, a checkpoint, a
  // hash). before_evaluation calls it.
  void sync_params() const;
};

// Validates the config (mode, accumulation >= 1, sync_bn only with ddp) and wraps `model`.
// ddp: uses `comm` or makes comm::make_world_communicator(config.device); converts BatchNorm to SyncBatchNorm
// when sync_bn; constructs DistributedDataParallel (collective: every rank must call it).
// dp: moves the model (on the CPU) to the first parsed device and wraps it in DataParallel over
// them. single: the model itself.
ParallelSetup setup_parallel(const ParallelConfig& config, std::shared_ptr<Module> model,
                             std::shared_ptr<comm::Communicator> comm = nullptr);

}  // namespace tandem::train
