// Batch gathering and per-batch normalisation; a batch's rows.
#include "runtime/data/loader.h"

#include <cstring>

#include "runtime/error.h"

namespace tandem::data {

std::vector<Tensor> Batch::inputs() const {
  std::vector<Tensor> all{x};
  all.insert(all.end(), more_x.begin(), more_x.end());
  return all;
}

Batch Batch::narrow(int64_t start, int64_t n) const {
  Batch part{x.narrow0(start, n), y.narrow0(start, n), {}};
  for (const Tensor& t : more_x) part.more_x.push_back(t.narrow0(start, n));
  return part;
}

Batch Batch::to(Device device) const {
  Batch moved{x.to(device), y.to(device), {}};
  for (const Tensor& t : more_x) moved.more_x.push_back(t.to(device));
  return moved;
}

Tensor gather_images(const Dataset& ds, const int64_t* indices, int64_t n) {
  const int64_t p = ds.pixels(), size = ds.size();
  Tensor out = Tensor::empty({n, p}, DType::u8);
  const uint8_t* src = ds.images.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    TANDEM_CHECK(indices[i] >= 0 && indices[i] < size, "sample index {} outside a dataset of {}", indices[i], size);
    std::memcpy(dst + i * p, src + indices[i] * p, static_cast<size_t>(p));
  }
  return out;
}

Tensor gather_labels(const Dataset& ds, const int64_t* indices, int64_t n) {
  const int64_t size = ds.size();
  Tensor out = Tensor::empty({n}, DType::i64);
  const uint8_t* src = ds.labels.data<uint8_t>();
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    TANDEM_CHECK(indices[i] >= 0 && indices[i] < size, "sample index {} outside a dataset of {}", indices[i], size);
    dst[i] = src[indices[i]];
  }
  return out;
}

Tensor normalize_images(const Tensor& images_u8, double mean, double std) {
  TANDEM_CHECK(images_u8.dtype() == DType::u8, "normalize_images takes u8 images, got {}",
               dtype_name(images_u8.dtype()));
  TANDEM_CHECK(images_u8.device().is_host_addressable(), "normalize_images runs on the host, got {}",
               images_u8.device().str());
  // One multiply-add per pixel: x * scale + shift == (x / 255 - mean) / std.
  const float scale = static_cast<float>(1.0 / (255.0 * std));
  const float shift = static_cast<float>(-mean / std);
  Tensor out = Tensor::empty(images_u8.shape(), DType::f32, images_u8.device());
  const uint8_t* src = images_u8.data<uint8_t>();
  float* dst = out.data<float>();
  const int64_t n = images_u8.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale + shift;
  return out;
}

BatchLoader::BatchLoader(Dataset dataset, std::shared_ptr<const Sampler> sampler, LoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options) {
  TANDEM_CHECK(dataset_.size() > 0, "BatchLoader: the dataset is empty");
  TANDEM_CHECK(sampler_ != nullptr, "BatchLoader: no sampler given");
  TANDEM_CHECK(options_.batch_size > 0, "BatchLoader: batch size must be positive, got {}", options_.batch_size);
  TANDEM_CHECK(options_.std > 0, "BatchLoader: std must be positive, got {}", options_.std);
}

void BatchLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  indices_ = sampler_->indices(epoch);
}

int64_t BatchLoader::num_samples() const {
  int64_t n = static_cast<int64_t>(indices_.size());
  return options_.drop_last ? n / options_.batch_size * options_.batch_size : n;
}

int64_t BatchLoader::num_batches() const {
  return (num_samples() + options_.batch_size - 1) / options_.batch_size;
}

std::string BatchLoader::describe() const { return std::to_string(dataset_.size()) + " samples"; }

Batch BatchLoader::batch(int64_t b) const {
  TANDEM_CHECK(epoch_ >= 0, "BatchLoader: call set_epoch(epoch) before reading batches");
  TANDEM_CHECK(b >= 0 && b < num_batches(), "BatchLoader: batch {} out of range [0, {})", b, num_batches());
  const int64_t start = b * options_.batch_size;
  const int64_t n = std::min(options_.batch_size, num_samples() - start);
  const int64_t* idx = indices_.data() + start;
  Batch out;
  Tensor x = normalize_images(gather_images(dataset_, idx, n), options_.mean, options_.std);  // [n, H*W]
  if (options_.layout == Layout::Image) x = x.view({n, 1, dataset_.height(), dataset_.width()});
  out.x = x.to(options_.device);
  out.y = gather_labels(dataset_, idx, n).to(options_.device);
  return out;
}

}  // namespace tandem::data
