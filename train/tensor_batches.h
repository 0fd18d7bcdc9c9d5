// The user's own arrays as the Trainer's batches: inputs x [N, ...] and labels y [N] (class indices),
// rows taken in the order the Trainer gives image data (Trainer::sampler: shuffled per epoch and
// sharded over the ranks for training, this rank's contiguous share for evaluation), so a resumed
// run reads the same batches as one that never stopped.
#pragma once
#include <memory>

#include "runtime/data/batch_source.h"
#include "runtime/data/sampler.h"
#include "train/trainer.h"

namespace tandem::train {

class TensorBatches final : public data::BatchSource {
 public:
  // x: any floating dtype (kept as f32) or integer ids (kept as i64), on the CPU; y: integer class
  // indices [N] (kept as i64). Batches of batch_size rows of `sampler`'s order, the last perhaps
  // short. Throws ValueError for row counts that differ, an empty x, or a y that is not indices.
  TensorBatches(Tensor x, Tensor y, int64_t batch_size, std::shared_ptr<const data::Sampler> sampler);

  void set_epoch(int64_t epoch) override;
  int64_t num_batches() const override;
  int64_t num_samples() const override { return static_cast<int64_t>(order_.size()); }
  data::Batch batch(int64_t b) const override;
  std::string describe() const override;

 private:
  Tensor x_, y_;
  int64_t batch_size_;
  std::shared_ptr<const data::Sampler> sampler_;
  std::vector<int64_t> order_;
};

// x and y as the Trainer's training batches (train: config.batch_size, shuffled, this rank's shard)
// or evaluation batches (config.eval_batch_size, this rank's share).
std::unique_ptr<data::BatchSource> tensor_batches(const TrainConfig& config, Tensor x, Tensor y, const World& world,
                                                  bool train);

}  // namespace tandem::train
