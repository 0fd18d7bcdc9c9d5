// DistributedDataParallel: wraps a module so that each rank trains a replica on its own share of the
// batch and the replicas stay identical: parameters and buffers are broadcast from rank 0 at
// construction (after checking that every rank has the same parameters), buffers again before each
// training forward (broadcast_buffers), and gradients are averaged over ranks by the Reducer during
// backward, overlapped with it. Semantics follow PyTorch's torch.nn.parallel.DistributedDataParallel.
//
//   DistributedDataParallel ddp(model, comm);
//   Tensor loss = ops::cross_entropy(ddp(x), y);
//   loss.backward();          // gradients are averaged over ranks when this returns
//   optimizer.step();
//
// A module taking several inputs (or returning several outputs) overrides Module::forward_many;
// ddp.forward_many({a, b}) runs it with the same synchronisation, and the Reducer watches every
// output's graph.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/parallel/ddp_options.h"

namespace tandem::nn::parallel {

// The gradient bucketing and all-reduce engine (nn/parallel/reducer.h), internal: the library's
// tests and benchmarks include reducer.h to read its buckets and statistics through reducer().
class Reducer;

class DistributedDataParallel final : public Module {
 public:
  // Collective: every rank of `comm` must construct it with the same module structure.
  DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<comm::Communicator> comm,
                          DDPOptions options = {});

  Tensor forward(const Tensor& x) override;  // forward_many({x}), which must give one output
  std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "DistributedDataParallel"; }
  // Replicas are made by constructing DDP on every rank, not by cloning.
  std::shared_ptr<Module> clone() const override;

  Module& module() { return *module_; }
  const std::shared_ptr<Module>& module_ptr() const { return module_; }
  comm::Communicator& communicator() { return *comm_; }
  const DDPOptions& options() const { return options_; }
  Reducer& reducer() { return *reducer_; }  // complete only where reducer.h is included

  // While a NoSync is alive, backward passes accumulate gradients locally; the first backward of a
  // forward run after it ends reduces the accumulated sum (PyTorch's `with ddp.no_sync():`).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp), prev_(ddp.require_backward_grad_sync_) {
      ddp.require_backward_grad_sync_ = false;
    }
    ~NoSync() {
      if (ddp_) ddp_->require_backward_grad_sync_ = prev_;
    }
    NoSync(NoSync&& o) noexcept : ddp_(o.ddp_), prev_(o.prev_) { o.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  bool require_backward_grad_sync() const { return require_backward_grad_sync_; }

  // Before optimizer.step(): throws the unused-parameter error now (rather than at the next forward)
  // if the last backward did not reduce every bucket. Gradients are already averaged otherwise.
  void finalize() const;

  // ZeRO (zero_stage 1, 2): waits for the all-gather of the parameters that the last optimizer step
  // started (ZeroOptimizer::step) and copies it into them. forward() calls it before running the
  // module; call it before anything else reads or writes the parameters between a step and the
  // next forward (a checkpoint, EMA, evaluating module() directly, a hash, an export, a load). A
  // no-op when nothing is in flight (and at stage 0). Not collective.
  void sync_params();

  // Names of the parameters in each bucket (reducer order), for logs and tests.
  std::vector<std::vector<std::string>> bucket_names() const;

  // Collective: overwrites every rank's buffers (BN running statistics) with rank 0's. forward()
  // does it when broadcast_buffers; call it before evaluating module() directly.
  void sync_buffers();

  // After this rank's training step failed (e.g. OutOfMemoryError in forward or backward) while the
  // other ranks went on: issues every collective of a synchronised iteration that this rank has not
  // issued yet, in the order a whole iteration issues them (the buffer broadcast, the used-parameter
  // count, each bucket not yet launched), so that the peers' reductions finish and every rank stays
  // in step. The reduced gradients are meaningless then: the caller zeroes them and redoes the step
  // (on every rank, agreed over the communicator). Call it only on ranks whose step failed.
  void complete_failed_step();

 private:
  void verify_same_parameters(const NamedTensors& params);

  std::shared_ptr<Module> module_;
  std::shared_ptr<comm::Communicator> comm_;
  DDPOptions options_;
  std::vector<std::string> reduced_names_;
  std::shared_ptr<Reducer> reducer_;
  bool require_backward_grad_sync_ = true;
  // How far the latest synchronised forward got (complete_failed_step's bookkeeping).
  enum class SyncPhase { none, buffers_synced, prepared };
  SyncPhase phase_ = SyncPhase::none;
};

}  // namespace tandem::nn::parallel
