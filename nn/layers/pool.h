// Pooling modules (NCHW): MaxPool2d, AvgPool2d; stride 0 means stride = kernel (PyTorch's default).
#pragma once
#include "nn/module.h"

namespace tandem::nn {

class MaxPool2d : public Cloneable<MaxPool2d> {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : k_(kernel_size), stride_(stride), pad_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  int64_t kernel_size() const { return k_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return pad_; }

 private:
  int64_t k_, stride_, pad_;
};

class AvgPool2d : public Cloneable<AvgPool2d> {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : k_(kernel_size), stride_(stride), pad_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  int64_t kernel_size() const { return k_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return pad_; }

 private:
  int64_t k_, stride_, pad_;
};

}  // namespace tandem::nn
