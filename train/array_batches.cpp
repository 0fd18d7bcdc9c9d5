// Batches read row by row from the user's array file.
#include "train/array_batches.h"

#include "runtime/error.h"
#include "runtime/ops.h"

namespace tandem::train {

int64_t ArraySelection::rows() const {
  TANDEM_CHECK(file != nullptr && !inputs.empty() && !labels.empty(), "array batches: a file, inputs and labels needed");
  std::vector<std::string> names = inputs;
  names.push_back(labels);
  const int64_t total = file->array(names[0]).rows();
  for (const std::string& name : names)
    TANDEM_CHECK(file->array(name).rows() == total,
                 "{}: arrays '{}' ({} rows) and '{}' ({} rows) differ in length: one row per sample in each",
                 file->path(), names[0], total, name, file->array(name).rows());
  TANDEM_CHECK(first >= 0 && first <= total && (count < 0 || first + count <= total),
               "{}: rows [{}, {}) asked for, the arrays have {}", file->path(), first, first + count, total);
  return count < 0 ? total - first : count;
}

ArrayBatches::ArrayBatches(ArraySelection selection, nn::config::LossType loss, int64_t batch_size,
                           std::shared_ptr<const data::Sampler> sampler)
    : sel_(std::move(selection)), batch_size_(batch_size), sampler_(std::move(sampler)) {
  sel_.count = sel_.rows();
  TANDEM_CHECK(batch_size_ >= 1, "array batches: batch size must be >= 1, got {}", batch_size_);
  const data::ArrayInfo& labels = sel_.file->array(sel_.labels);
  const bool classes = loss == nn::config::LossType::CrossEntropy;
  TANDEM_CHECK(!classes || !is_floating(labels.dtype),
               "{}: labels '{}' are {}; loss cross_entropy needs class indices (an integer array), or choose a "
               "regression loss (--loss mse, l1 or bce_with_logits)", sel_.file->path(), sel_.labels,
               dtype_name(labels.dtype));
  label_dtype_ = classes ? DType::i64 : DType::f32;
  set_epoch(0);
}

void ArrayBatches::set_epoch(int64_t epoch) {
  order_ = sampler_->indices(epoch);
  for (int64_t i : order_)
    TANDEM_CHECK(i >= 0 && i < sel_.count, "array batches: the sampler gave row {} of {}", i, sel_.count);
}

data::Batch ArrayBatches::batch(int64_t b) const {
  TANDEM_CHECK(b >= 0 && b < num_batches(), "array batches: batch {} of {}", b, num_batches());
  const int64_t begin = b * batch_size_, n = std::min(batch_size_, num_samples() - begin);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) rows[static_cast<size_t>(j)] = sel_.first + order_[static_cast<size_t>(begin + j)];
  auto read = [&](const std::string& name, DType as) {
    Tensor t = sel_.file->read_rows(name, rows);
    return t.dtype() == as ? t : ops::cast(t, as);
  };
  data::Batch out;
  for (const std::string& name : sel_.inputs) {
    Tensor x = read(name, is_floating(sel_.file->array(name).dtype) ? DType::f32 : DType::i64);
    if (out.x.defined()) out.more_x.push_back(std::move(x));
    else out.x = std::move(x);
  }
  out.y = read(sel_.labels, label_dtype_);
  return out;
}

std::string ArrayBatches::describe() const {
  return fmt::format("{} samples of {} (inputs {}, labels {})", num_samples(), sel_.file->path(),
                     fmt::join(sel_.inputs, ", "), sel_.labels);
}

std::unique_ptr<data::BatchSource> array_batches(const TrainConfig& config, ArraySelection selection,
                                                 const World& world, bool train) {
  const int64_t n = selection.rows();
  return std::make_unique<ArrayBatches>(std::move(selection), config.loss.type,
                                        train ? config.batch_size : config.eval_batch_size,
                                        Trainer::sampler(config, n, world, train));
}

}  // namespace tandem::train
