// BatchSource: what a train loop reads batches from, epoch by epoch (image batches from a
// BatchLoader, token windows from a TextWindows). batch(b) depends only on the epoch set and b, so a
// resumed run reads the same batches as one that never stopped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::data {

struct Batch {
  Tensor x;  // images f32 [B, H*W] or [B, 1, H, W]; token ids i64 [B, T]; the user's first input array
  Tensor y;  // labels i64 [B]; next tokens i64 [B, T]; the user's label array (targets f32 [B, ...])
  std::vector<Tensor> more_x;  // a model of several inputs: its second, third... (rows as x)
  int64_t size() const { return y.size(0); }
  std::vector<Tensor> inputs() const;   // x and more_x
  Batch narrow(int64_t start, int64_t n) const;  // rows [start, start + n) of every tensor
  Batch to(Device device) const;                 // every tensor on `device`
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fixes the order of the epoch's batches; call before reading an epoch.
  virtual void set_epoch(int64_t epoch) = 0;
  virtual int64_t num_batches() const = 0;
  // Samples (images, windows) of this rank's pass: every batch is full but perhaps the last, so a
  // loop can size batch b (e.g. to cut it into micro-batches) before reading it.
  virtual int64_t num_samples() const = 0;
  virtual Batch batch(int64_t b) const = 0;  // b in [0, num_batches())
  // What one pass covers, for log lines: "60000 samples", "2322455 training bytes".
  virtual std::string describe() const = 0;
};

}  // namespace tandem::data
