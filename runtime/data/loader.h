// Batch loader: gathers a batch of dataset indices into a uint8 tensor and normalises it to f32
// ((x / 255 - mean) / std), shaped [B, H*W] (flat, for the mlp) or [B, 1, H, W] (image, for the cnn).
#pragma once
#include <memory>
#include <vector>

#include "runtime/data/batch_source.h"
#include "runtime/data/dataset.h"
#include "runtime/data/sampler.h"
#include "runtime/tensor.h"

namespace tandem::data {

enum class Layout { Flat, Image };

struct LoaderOptions {
  int64_t batch_size = 128;
  Layout layout = Layout::Flat;
  bool drop_last = false;  // drop the last, smaller batch of an epoch
  Device device = kCPU;    // where the batch goes (gathered and converted on the host, then moved)
  double mean = kFashionMnistMean;
  double std = kFashionMnistStd;
};

// Gathers rows `indices[0..n)` of the dataset: images u8 [n, H*W], labels i64 [n].
Tensor gather_images(const Dataset& ds, const int64_t* indices, int64_t n);
Tensor gather_labels(const Dataset& ds, const int64_t* indices, int64_t n);
// u8 -> f32 with (x / 255 - mean) / std, same shape.
Tensor normalize_images(const Tensor& images_u8, double mean, double std);

class BatchLoader final : public BatchSource {
 public:
  BatchLoader(Dataset dataset, std::shared_ptr<const Sampler> sampler, LoaderOptions options);

  // Draws the epoch's index list from the sampler; call before iterating an epoch.
  void set_epoch(int64_t epoch) override;
  int64_t epoch() const { return epoch_; }
  int64_t num_batches() const override;
  int64_t num_samples() const override;  // samples visited this epoch (after drop_last)
  Batch batch(int64_t b) const override;  // b in [0, num_batches())
  std::string describe() const override;

  const Dataset& dataset() const { return dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  Dataset dataset_;
  std::shared_ptr<const Sampler> sampler_;
  LoaderOptions options_;
  int64_t epoch_ = -1;
  std::vector<int64_t> indices_;
};

}  // namespace tandem::data
