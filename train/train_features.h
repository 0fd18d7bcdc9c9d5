// The full training run of tandem-train: the Trainer with data parallelism (single | ddp | dp,
// accumulation), mixed precision (autocast + GradScaler), gradient clipping, activation
// checkpointing, EMA, periodic checkpoints and exact resume, and a parameter hash for checking it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "train/precision_step.h"
#include "train/parallel_setup.h"
#include "train/trainer.h"
#include "nn/training_state.h"

namespace tandem::train {

// The configured mode; for auto, ddp when launched by mpirun/PMI with > 1 rank (OMPI_COMM_WORLD_SIZE /
// PMI_SIZE), else single (mode_auto.h decides dp too).
ParallelMode resolve_mode(ParallelMode configured);

// --global-batch-size G on `world` ranks: the per-rank batch G / world; a ValueError saying so when
// G is not a multiple of world (the global batch, hence the run, could not be kept).
int64_t per_rank_batch(int64_t global_batch, int world);

// FNV-1a (64 bit) over the bytes of every tensor of `model.state_dict()` in order, as 16 hex digits.
std::string param_hash(const nn::Module& model);

// The model for the run: make_model(cfg), wrapped for --checkpoint-activations (same state_dict names).
std::shared_ptr<nn::Module> make_run_model(const TrainConfig& cfg);
// What --save-onnx writes for such a model: the Sequential inside --checkpoint-activations' wrapper
// (the same modules and weights: the wrapper only changes how backward gets its activations), else
// the model itself.
const nn::Module& exported_model(const nn::Module& model);

class FullTrainer : public Trainer {
 public:
  // `ps` from setup_parallel over make_run_model(cfg); the optimizer over ps.model->parameters().
  FullTrainer(const TrainConfig& cfg, ParallelSetup ps, std::unique_ptr<nn::Optimizer> optimizer,
              data::Dataset train_set, data::Dataset test_set);
  // The same over any batches (e.g. text windows for --model gpt).
  FullTrainer(const TrainConfig& cfg, ParallelSetup ps, std::unique_ptr<nn::Optimizer> optimizer,
              std::unique_ptr<data::BatchSource> train, std::unique_ptr<data::BatchSource> test);

  // --resume: restores model, optimizer, scaler, schedule, EMA, RNG and the loop position.
  void resume(const std::string& path);
  // Rank 0 writes cfg.save_dir/ckpt-<step>; the others wait (collective).
  void save();
  std::string param_hash() const {
    ps_.sync_params();
    return ::tandem::train::param_hash(*ps_.inner);
  }
  const ParallelSetup& parallel() const { return ps_; }
  // --ema's average (null without --ema): the weights the run evaluates, and so --save-onnx exports.
  const nn::EMA* ema() const { return ema_.get(); }

 protected:
  Tensor forward_loss(const data::Batch& batch) override;
  void backward(const Tensor& loss) override;
  void optimizer_step() override;
  std::shared_ptr<void> micro_batch_scope(bool reduce) override;
  std::shared_ptr<void> evaluation_scope() override;
  void fill_done_record(nlohmann::json& record) override;
  void complete_failed_step() override;  // train_recovery.cpp

 private:
  void init_features();
  nn::TrainComponents components();
  nn::TrainProgress progress();
  void barrier();

  ParallelSetup ps_;
  PrecisionStep precision_;  // autocast, the GradScaler, the clipped update
  std::unique_ptr<nn::EMA> ema_;
  int64_t last_saved_step_ = -1;
  bool skip_step_ = false;  // set by the non-finite guard (--no-stop-on-nonfinite)
  friend class FullTrainerHooks;
};

}  // namespace tandem::train
