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
    for (const std::string& name : cfg.data_inputs) {
      const Shape& a = d.train.file->array(name).shape;
      const Shape& b = d.val->file->array(name).shape;
      TANDEM_CHECK(Shape(a.begin() + 1, a.end()) == Shape(b.begin() + 1, b.end()) &&
                       d.train.file->array(name).dtype == d.val->file->array(name).dtype,
                   "array '{}': {} has samples of shape {} and {} has {}: validation samples must be like training's",
                   name, cfg.data_file, shape_str(Shape(a.begin() + 1, a.end())), cfg.val_data_file,
                   shape_str(Shape(b.begin() + 1, b.end())));
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
  data::Batch batch = rows.batch(0);
  std::string arrays;
  for (const std::string& name : cfg.data_inputs) {
    const data::ArrayInfo& a = d.train.file->array(name);
    arrays += fmt::format("'{}' {} {}, ", name, dtype_name(a.dtype), shape_str(a.shape));
  }
  const data::ArrayInfo& y = d.train.file->array(cfg.data_labels);
  arrays += fmt::format("labels '{}' {} {}", cfg.data_labels, dtype_name(y.dtype), shape_str(y.shape));
  const bool was_training = model.is_training();
  try {
    NoGradGuard no_grad;
    model.eval();
    const std::vector<Tensor> params = model.parameters();
    const Device device = params.empty() ? kCPU : params.front().device();
    std::vector<Tensor> inputs = batch.inputs();
    for (Tensor& t : inputs) t = t.to(device);
    std::vector<Tensor> out = model.forward_many(inputs);
    TANDEM_CHECK(out.size() == 1, "the model gives {} outputs; training with one label array needs one", out.size());
    nn::config::compute_loss(cfg.loss, out[0], batch.y.to(device));
    model.train(was_training);
  } catch (const Error& e) {
    model.train(was_training);
    TANDEM_FAIL(Value, "{}: arrays {} do not fit model {} with loss {}: {}", cfg.data_file, arrays, cfg.model.type,
                enum_name(cfg.loss.type), e.what());
  }
}

}  // namespace tandem::app
