// Batches gathered from in-memory arrays.
#include "train/tensor_batches.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/error.h"
#include "runtime/ops/shape.h"

namespace tandem::train {

namespace {

// Row i of `src` ([N, ...], contiguous on the CPU) into row j of `dst`.
void copy_row(const Tensor& src, int64_t i, Tensor& dst, int64_t j) {
  const size_t row = static_cast<size_t>(src.numel() / src.size(0)) * src.element_size();
  std::memcpy(static_cast<char*>(dst.data_ptr()) + static_cast<size_t>(j) * row,
              static_cast<const char*>(src.data_ptr()) + static_cast<size_t>(i) * row, row);
}

Tensor on_host(const Tensor& t, DType dtype) {
  Tensor h = t.to(kCPU);
  return h.dtype() == dtype ? h : ops::cast(h, dtype);  // tensors are contiguous (views: reshape, dim-0 slices)
}

}  // namespace

TensorBatches::TensorBatches(Tensor x, Tensor y, int64_t batch_size, std::shared_ptr<const data::Sampler> sampler)
    : batch_size_(batch_size), sampler_(std::move(sampler)) {
  TANDEM_CHECK(x.defined() && x.dim() >= 1 && x.size(0) > 0, "tensor batches: x must have at least one row, got {}",
               x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  TANDEM_CHECK(y.defined() && y.dim() == 1 && !is_floating(y.dtype()),
               "tensor batches: y must be class indices, an integer tensor [N], got {} {}",
               y.defined() ? dtype_name(y.dtype()) : "undefined", y.defined() ? shape_str(y.shape()) : "");
  TANDEM_CHECK(x.size(0) == y.size(0), "tensor batches: x has {} rows and y {}: one label per row", x.size(0),
               y.size(0));
  TANDEM_CHECK(batch_size_ >= 1, "tensor batches: batch size must be >= 1, got {}", batch_size_);
  x_ = on_host(x.detach(), is_floating(x.dtype()) ? DType::f32 : DType::i64);
  y_ = on_host(y.detach(), DType::i64);
  set_epoch(0);
}

void TensorBatches::set_epoch(int64_t epoch) {
  order_ = sampler_->indices(epoch);
  for (int64_t i : order_)
    TANDEM_CHECK(i >= 0 && i < x_.size(0), "tensor batches: the sampler gave row {} of {}", i, x_.size(0));
}

int64_t TensorBatches::num_batches() const { return (num_samples() + batch_size_ - 1) / batch_size_; }

data::Batch TensorBatches::batch(int64_t b) const {
  TANDEM_CHECK(b >= 0 && b < num_batches(), "tensor batches: batch {} of {}", b, num_batches());
  const int64_t begin = b * batch_size_, rows = std::min(batch_size_, num_samples() - begin);
  Shape xs = x_.shape();
  xs[0] = rows;
  data::Batch out{Tensor::empty(xs, x_.dtype()), Tensor::empty({rows}, DType::i64), {}};
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t i = order_[static_cast<size_t>(begin + j)];
    copy_row(x_, i, out.x, j);
    copy_row(y_, i, out.y, j);
  }
  return out;
}

std::string TensorBatches::describe() const { return fmt::format("{} samples", num_samples()); }

std::unique_ptr<data::BatchSource> tensor_batches(const TrainConfig& config, Tensor x, Tensor y, const World& world,
                                                  bool train) {
  const int64_t n = x.defined() && x.dim() >= 1 ? x.size(0) : 0;
  return std::make_unique<TensorBatches>(std::move(x), std::move(y), train ? config.batch_size : config.eval_batch_size,
                                         Trainer::sampler(config, n, world, train));
}

}  // namespace tandem::train
