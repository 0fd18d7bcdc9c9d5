// tandem-train --data: the user's array file opened and split into training and validation rows
// (--val-data FILE, or the last --val-fraction of the rows), and checked against the model before
// any step: arrays that do not fit the model or the loss are an error naming the file and arrays.
#pragma once
#include <optional>

#include "apps/common/engine.h"
#include "train/array_batches.h"
#include "train/train_config.h"
#include "nn/module.h"

namespace tandem::app {

struct ArrayData {
  train::ArraySelection train;
  std::optional<train::ArraySelection> val;  // none: no validation
};

// ValueError for flags that do not go together (--val-data with --val-fraction, --loss other than
// cross_entropy without --data), IOError/ValueError from the files.
ArrayData open_array_data(const TrainConfig& cfg);

// Two rows of the training arrays through `model` (in eval mode, without gradients) and the loss.
void check_arrays_fit(const TrainConfig& cfg, const ArrayData& data, nn::Module& model);

}  // namespace tandem::app
