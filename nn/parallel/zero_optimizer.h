// ZeroOptimizer: ZeRO stages 1 and 2 over DistributedDataParallel (DDPOptions::zero_stage). Each
// rank updates only its shard of every gradient bucket, the chunk that the ring's reduce-scatter
// phase leaves it reduced (Communicator::owned_chunk), with an optimizer of the run's type over
// views of those elements, so its state (moments, f32 master weights) is 1/N of DDP's; after the
// step the updated chunks are all-gathered (the ring's all-gather phase) into every replica,
// asynchronously: the next forward through ddp waits for them.
//
//   DistributedDataParallel ddp(model, comm, {.zero_stage = 1});
//   ZeroOptimizer opt(ddp, std::make_unique<nn::AdamW>(ddp.parameters(), o));
//   ... forward, backward through ddp ...; opt.step();   // the new weights arrive by the next ddp forward
//   opt.wait_params();   // only to read the parameters before that (a checkpoint, EMA, a hash)
//
// Bitwise equal to stage 0: the owned chunk is reduced by the all-reduce's own additions in its
// own order (comm/ring.h), and the optimizers update element by element, so a shard view of a
// parameter gets the bits its element would get in the whole tensor.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp.h"

namespace tandem::nn::parallel {

class ZeroOptimizer final : public Optimizer {
 public:
  // `full`: the run's optimizer over ddp's parameters, not stepped yet (its groups, learning rates,
  // weight decays and hyperparameters are kept; Optimizer::with_groups rebuilds it over the shard).
  // ddp must have zero_stage 1 or 2. A fused optimizer that clips inside its step is refused (a
  // shard's norm is not the global one).
  ZeroOptimizer(DistributedDataParallel& ddp, std::unique_ptr<Optimizer> full);

  // The shard's update, then the all-gather of the parameters, started and not waited for: the
  // next forward through ddp waits for it (DistributedDataParallel::sync_params), as must anything
  // that reads the parameters before (wait_params).
  void step() override;
  void wait_params();
  // The model's gradients (what no_sync accumulates into) and the shard's.
  void zero_grad() override;
  std::string type_name() const override;

  const Optimizer& shard_optimizer() const { return *inner_; }

  // Checkpoints hold the whole model's optimizer state in stage 0's layout (Optimizer::state_tensors
  // of the run's optimizer over every parameter), so that they load at any world size and stage.
  // consolidate_state: collective (every rank, at the same step): gathers the shards' state; then
  // state_tensors() on rank `root` returns it (elsewhere, and before consolidation, ValueError).
  // load_state_tensors takes such a state (from any stage and world size) and keeps this rank's shard.
  void consolidate_state(int root = 0);
  NamedTensors state_tensors() const override;
  void load_state_tensors(const NamedTensors& state) override;
  int zero_stage() const { return stage_; }
  int64_t shard_numel() const { return shard_numel_; }  // elements this rank updates
  // The model's parameters (their gradients: what backward accumulates), in the order of groups.
  const std::vector<Tensor>& model_params() const { return model_params_; }

 protected:
  void update(const ParamGroup&, size_t, Tensor&, const Tensor&) override;
  NamedTensors param_state(size_t index) const override { return inner_->param_state(index); }
  void reset_param_state(size_t index) override { inner_->reset_param_state(index); }
  void set_param_state(size_t index, const std::string& name, const Tensor& value) override {
    inner_->set_param_state(index, name, value);
  }
  void check_loaded_state(size_t index, const std::vector<std::string>& given) const override {
    inner_->check_loaded_state(index, given);
  }
  std::vector<std::string> state_names() const override { return inner_->state_names(); }

 private:
  // One parameter's elements inside one bucket's shard.
  struct Piece {
    size_t param;        // index in the reducer's parameters
    size_t bucket;
    int64_t offset = 0;  // first element in the parameter
    int64_t length = 0;
  };
  // The dtype of a state tensor of bucket b's parameters (f32 for master weights of 16-bit ones).
  DType state_dtype(size_t bucket) const;

  DistributedDataParallel& ddp_;
  int stage_ = 0;
  std::unique_ptr<Optimizer> inner_;
  std::vector<Piece> pieces_;  // in the order of groups_' parameters
  std::vector<Tensor> model_params_;
  int64_t shard_numel_ = 0;
  std::vector<size_t> full_index_;  // reducer parameter -> index over full groups (or SIZE_MAX)
  NamedTensors full_state_;         // consolidate_state's result (on its root)
  int64_t consolidated_step_ = -1;  // step_count_ when it was gathered; -1: none
};

}  // namespace tandem::nn::parallel
