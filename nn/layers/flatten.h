// Flatten dims start_dim..end_dim into one (default: all but the batch dim), a view.
#pragma once
#include "nn/module.h"

namespace tandem::nn {

class Flatten : public Cloneable<Flatten> {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  int64_t start_dim() const { return start_; }
  int64_t end_dim() const { return end_; }

 private:
  int64_t start_, end_;
};

}  // namespace tandem::nn
