// Trainer: the train loop shared by the apps (epochs of shuffled batches, forward, loss, backward,
// optimizer and LR-schedule steps; evaluation with metrics summed across ranks; rank-0 logging and
// JSON-lines metrics). Later features plug in through TrainerCallback (checkpoints, EMA), the
// virtual step pieces (autocast, GradScaler) and World (DDP: communicator, rank, sampler shards).
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "train/metrics.h"
#include "train/step_agreement.h"
#include "train/train_config.h"
#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "runtime/data/loader.h"

namespace tandem::train {

// The processes training together. Without a communicator: one process (rank 0 of 1).
struct World {
  std::shared_ptr<comm::Communicator> comm;
  int rank() const { return comm ? comm->rank() : 0; }
  int size() const { return comm ? comm->size() : 1; }
  // Sums `values` element-wise over all ranks, in place (a no-op for one process).
  void sum(std::vector<double>& values) const;
};

// Where the loop stands; a checkpoint saves it and a resume restores it before fit().
struct TrainState {
  int64_t epoch = 0;           // the epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // the next batch of that epoch
  int64_t step = 0;            // optimizer steps taken so far
};

struct EpochStats {
  int64_t epoch = 0;          // 1-based in reports
  int64_t steps = 0;          // global step count at the end of the epoch
  int64_t samples = 0;        // training samples this epoch, all ranks
  double train_loss = 0;      // mean over this epoch's samples, all ranks
  double train_seconds = 0;   // training time only (no evaluation)
  double samples_per_s = 0;   // all ranks
  double lr = 0;              // at the end of the epoch
  bool evaluated = false;
  bool classification = true;  // false: a regression loss, test_acc means nothing
  double test_acc = 0, test_loss = 0;
  int64_t test_samples = 0;  // all ranks: the whole test split, each image once
};

struct EvalResult {
  int64_t samples = 0;
  bool classification = true;  // loss cross_entropy: accuracy counts; otherwise loss alone
  double accuracy = 0, loss = 0;
};

struct TrainResult {
  int64_t epochs = 0, steps = 0, samples = 0;
  double train_seconds = 0, samples_per_s = 0;
  bool evaluated = false, classification = true;
  double test_acc = 0, test_loss = 0;
  int64_t test_samples = 0;
  std::vector<EpochStats> history;
};

class Trainer;

// `model` on the batch's inputs (x, then more_x, through forward_many): its one output, the one
// the loss compares with batch.y; ValueError for a model of several outputs.
Tensor batch_output(nn::Module& model, const data::Batch& batch);

// Hooks with empty defaults. Called on every rank.
class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(Trainer&) {}
  virtual void on_epoch_begin(Trainer&, int64_t /*epoch*/) {}
  virtual void after_backward(Trainer&) {}  // gradients final for this step (clip, inspect); agreement() summed
  virtual void after_step(Trainer&) {}      // parameters updated (EMA, periodic checkpoints)
  virtual void on_epoch_end(Trainer&, const EpochStats&) {}
  virtual void on_train_end(Trainer&, const TrainResult&) {}
};

class Trainer {
 public:
  // Image classification: shuffled batches of train_set (a shard per rank), test_set for evaluate().
  Trainer(TrainConfig config, std::shared_ptr<nn::Module> model, std::unique_ptr<nn::Optimizer> optimizer,
          data::Dataset train_set, data::Dataset test_set, World world = {});
  // Any batches: `train` (this rank's, per epoch) and `test` (this rank's share of the evaluation set).
  Trainer(TrainConfig config, std::shared_ptr<nn::Module> model, std::unique_ptr<nn::Optimizer> optimizer,
          std::unique_ptr<data::BatchSource> train, std::unique_ptr<data::BatchSource> test, World world = {});
  // The image batches of the first constructor (train: shuffled, a shard per rank; test: this rank's
  // contiguous share, unshuffled).
  static std::unique_ptr<data::BatchSource> image_batches(const TrainConfig& config, data::Dataset set,
                                                          const World& world, bool train);
  // The order of n samples that image_batches (and tensor_batches.h) read: train, a seeded
  // permutation per epoch (config.seed), a shard of it per rank; evaluation, this rank's contiguous
  // share.
  static std::shared_ptr<const data::Sampler> sampler(const TrainConfig& config, int64_t n, const World& world,
                                                      bool train);
  virtual ~Trainer() = default;

  void add_callback(std::shared_ptr<TrainerCallback> cb) { callbacks_.push_back(std::move(cb)); }
  // Runs from state() to the last epoch (or max_steps); logs and writes metrics as it goes.
  TrainResult fit();
  // Accuracy and mean loss over the test split (this rank's shard, summed over ranks); for sequence
  // models (logits [B, T, V]) per token: next-token accuracy and loss; for a loss other than
  // cross_entropy the mean loss alone.
  EvalResult evaluate();

  TrainState& state() { return state_; }
  const TrainConfig& config() const { return config_; }
  nn::Module& model() { return *model_; }
  std::shared_ptr<nn::Module> model_ptr() { return model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }
  nn::LRScheduler* scheduler() { return scheduler_.get(); }
  const World& world() const { return world_; }
  const Logger& log() const { return log_; }
  MetricsWriter& metrics() { return metrics_; }
  int64_t batches_per_epoch() const { return train_loader_->num_batches(); }
  // Optimizer steps per epoch: batches grouped by accumulation_steps (the last group may be short).
  int64_t steps_per_epoch() const;
  // The loss of the latest training step (this rank's batch mean), for callbacks.
  double last_loss() const { return last_loss_; }
  void request_stop() { stop_ = true; }
  // The ranks' one agreement per step (step_agreement.h): a feature adds its share before fit() and
  // reads the sums from after_backward on.
  StepAgreement& agreement() { return agreement_; }
  // Samples per forward (the loader's batch until an out-of-memory recovery halves it; trainer_step.cpp)
  // and micro-batches per optimizer step in force; recoveries so far.
  int64_t micro_batch_size() const { return micro_batch_ > 0 ? micro_batch_ : config_.batch_size; }
  int64_t effective_accumulation_steps() const;
  int64_t oom_recoveries() const { return oom_recoveries_; }

 protected:
  // One training step's pieces; override to add autocast (forward) or a GradScaler
  // (backward/optimizer_step). forward_loss returns the mean loss of the batch.
  virtual Tensor forward_loss(const data::Batch& batch);
  virtual void backward(const Tensor& loss);
  virtual void optimizer_step();
  // Held across forward and backward of one micro-batch; `reduce` is true for the last micro-batch
  // before an optimizer step (DDP's no_sync otherwise). Default: nothing.
  virtual std::shared_ptr<void> micro_batch_scope(bool /*reduce*/) { return nullptr; }
  // Held while evaluating (e.g. EMA weights swapped in). Collective calls allowed (every rank).
  virtual std::shared_ptr<void> evaluation_scope() { return nullptr; }
  // Extra fields of the final "done" metrics record (e.g. a parameter hash).
  virtual void fill_done_record(nlohmann::json& /*record*/) {}
  // This rank's step failed (out of memory) while the others may have gone on: issue the step's
  // remaining collectives (DDP's buckets) so that every rank stays in step. Default: nothing.
  virtual void complete_failed_step() {}

 private:
  // Trains one epoch from state_.batch_in_epoch; returns false when max_steps or a stop ended it.
  bool train_epoch(EpochStats& stats);
  // Batch b of `loader`, on the device of the model's parameters.
  data::Batch load(const data::BatchSource& loader, int64_t b) const;
  // Forward and backward of the loader batches [g, group_end) as one optimizer step's gradient (the
  // mean over the loader batches of each one's mean loss, however it is cut), in micro-batches of
  // micro_batch_size(); on an out-of-memory error (agreed by all ranks) drops the step's tensors,
  // halves the micro-batch and redoes it: the same samples and the same global batch
  // (trainer_step.cpp).
  struct GroupResult {
    double loss = 0, loss_sum = 0, samples = 0;
  };
  GroupResult train_group(int64_t g, int64_t group_end);
  // One attempt of train_group; throws OutOfMemoryError.
  GroupResult attempt_group(int64_t g, int64_t group_end);

  TrainConfig config_;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<nn::LRScheduler> scheduler_;
  World world_;
  Device input_device_ = kCPU;
  std::unique_ptr<data::BatchSource> train_loader_, test_loader_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  TrainState state_;
  Logger log_;
  MetricsWriter metrics_;
  bool stop_ = false;
  double last_loss_ = 0;
  int64_t micro_batch_ = 0;  // 0: the loader's batch size
  int64_t oom_recoveries_ = 0;
  StepAgreement agreement_;
  std::optional<size_t> oom_share_;  // this rank's attempt failed: in the agreement where it can recover
  bool attempt_failed_ = false;      // the latest attempt's, for oom_share_
};

}  // namespace tandem::train
