// The user's arrays for tandem-train: the files, the split, the fit with the model.
#include "apps/common/array_data.h"

#include "nn/config/run_config.h"
#include "runtime/autograd.h"
#include "runtime/data/sampler.h"
#include "runtime/error.h"

namespace tandem::app {

ArrayData open_array_data(const TrainConfig& cfg) {
  TANDEM_CHECK(cfg.val_data_file.empty() || cfg.val_fraction == 0.0,
               "--val-data and --val-fraction: give one way of choosing the validation rows");
  ArrayData d;
  d.train = {data::open_array_file(cfg.data_file), cfg.data_inputs, cfg.data_labels, 0, -1};
  const int64_t rows = d.train.rows();
  if (!cfg.val_data_file.empty()) {
    d.val = train::ArraySelection{data::open_array_file(cfg.val_data_file), cfg.data_inputs, cfg.data_labels, 0, -1};
    d.val->rows();
    // One sample of an array: its dtype and its shape without the first dimension.
    auto sample = [](const data::ArrayInfo& a) {
      return fmt::format("{} {}", dtype_name(a.dtype), shape_str(Shape(a.shape.begin() + 1, a.shape.end())));
    };
    for (const std::string& name : cfg.data_inputs) {
      const std::string train_sample = sample(d.train.file->array(name)), val_sample = sample(d.val->file->array(name));
      TANDEM_CHECK(train_sample == val_sample,
                   "array '{}': {} has samples of {} and {} has {}: validation samples must be like training's", name,
                   cfg.data_file, train_sample, cfg.val_data_file, val_sample);
    }
  } else if (cfg.val_fraction > 0.0) {
    const auto val_rows = static_cast<int64_t>(static_cast<double>(rows) * cfg.val_fraction);
    TANDEM_CHECK(val_rows >= 1 && val_rows < rows, "--val-fraction {} of {} rows leaves {} for validation and {} for "
                 "training: both need at least one", cfg.val_fraction, rows, val_rows, rows - val_rows);
    d.train.count = rows - val_rows;
    d.val = d.train;
    d.val->first = rows - val_rows;
    d.val->count = val_rows;
  }
  return d;
}

void check_arrays_fit(const TrainConfig& cfg, const ArrayData& d, nn::Module& model) {
  const int64_t n = std::min<int64_t>(2, d.train.rows());
  TANDEM_CHECK(n > 0, "{}: the arrays have no rows to train on", cfg.data_file);
  train::ArraySelection probe = d.train;
  probe.count = n;
  const train::ArrayBatches rows(probe, cfg.loss.type, n, std::make_shared<data::SequentialSampler>(n));
  const bool was_training = model.is_training();
  try {
    NoGradGuard no_grad;
    model.eval();
    const std::vector<Tensor> params = model.parameters();
    const data::Batch batch = rows.batch(0).to(params.empty() ? kCPU : params.front().device());
    nn::config::compute_loss(cfg.loss, train::batch_output(model, batch), batch.y);
    model.train(was_training);
  } catch (const Error& e) {
    model.train(was_training);
    std::string arrays;
    for (const std::string& name : cfg.data_inputs) {
      const data::ArrayInfo& a = d.train.file->array(name);
      arrays += fmt::format("'{}' {} {}, ", name, dtype_name(a.dtype), shape_str(a.shape));
    }
    const data::ArrayInfo& y = d.train.file->array(cfg.data_labels);
    arrays += fmt::format("labels '{}' {} {}", cfg.data_labels, dtype_name(y.dtype), shape_str(y.shape));
    TANDEM_FAIL(Value, "{}: arrays {} do not fit model {} with loss {}: {}", cfg.data_file, arrays, cfg.model.type,
                enum_name(cfg.loss.type), e.what());
  }
}

}  // namespace tandem::app
