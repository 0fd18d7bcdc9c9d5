// The user's arrays as the Trainer's batches (tandem-train --data FILE --inputs x --labels y): rows
// [first, first + count) of named arrays of an ArrayFile (.npy/.npz/.h5; the file's training part or
// its validation part), visited in the order Trainer::sampler gives over them (training: shuffled per
// epoch, this rank's shard; evaluation: this rank's contiguous share). Each batch reads only its own
// rows from the file, so a file larger than memory trains and every rank reads only its samples.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/array_file.h"
#include "runtime/data/batch_source.h"
#include "train/trainer.h"

namespace tandem::train {

struct ArraySelection {
  std::shared_ptr<const data::ArrayFile> file;
  std::vector<std::string> inputs;  // the model's inputs in order (one or more arrays)
  std::string labels;               // the loss's target
  int64_t first = 0, count = -1;    // the rows used (count -1: to the end)

  // Rows in use, after checking that the arrays exist and have the same number of rows (ValueError
  // naming the file and the arrays otherwise).
  int64_t rows() const;
};

class ArrayBatches final : public data::BatchSource {
 public:
  // Inputs: floating arrays as f32, integer ones (ids) as i64. Labels: class indices (i64) for
  // cross_entropy, targets (f32) for the other losses; a floating label array for cross_entropy is
  // an error naming it.
  ArrayBatches(ArraySelection selection, nn::config::LossType loss, int64_t batch_size,
               std::shared_ptr<const data::Sampler> sampler);

  void set_epoch(int64_t epoch) override;
  int64_t num_batches() const override { return (num_samples() + batch_size_ - 1) / batch_size_; }
  int64_t num_samples() const override { return static_cast<int64_t>(order_.size()); }
  data::Batch batch(int64_t b) const override;
  std::string describe() const override;

 private:
  ArraySelection sel_;
  DType label_dtype_;
  int64_t batch_size_;
  std::shared_ptr<const data::Sampler> sampler_;
  std::vector<int64_t> order_;  // indices into the selection's rows
};

// The selection as training batches (config.batch_size, shuffled, this rank's shard) or evaluation
// batches (config.eval_batch_size, this rank's share).
std::unique_ptr<data::BatchSource> array_batches(const TrainConfig& config, ArraySelection selection,
                                                 const World& world, bool train);

}  // namespace tandem::train
