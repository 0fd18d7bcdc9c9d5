// BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): weight 1, bias 0 (affine),
// buffers running_mean 0, running_var 1, num_batches_tracked (i64 scalar), as PyTorch.
// Training normalises with batch statistics and updates the running ones (momentum, unbiased
// variance); eval uses the running statistics. An epilogue (set by Sequential::fuse_batchnorm_epilogues)
// makes the layer also apply the ReLU and MaxPool2d that followed it, inside ops::batch_norm.
#pragma once
#include "nn/module.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  int64_t num_features() const { return c_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  const ops::BatchNormEpilogue& epilogue() const { return epilogue_; }
  void set_epilogue(const ops::BatchNormEpilogue& e) { epilogue_ = e; }

 protected:
  BatchNormBase(int64_t num_features, double eps, double momentum, bool affine);
  virtual bool accepts_dim(int64_t dim) const = 0;
  virtual const char* expected_shape() const = 0;

  int64_t c_;
  double eps_, momentum_;
  bool affine_;
  ops::BatchNormEpilogue epilogue_;
};

class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNormBase(num_features, eps, momentum, affine) {}
  std::string type_name() const override { return "BatchNorm1d"; }
  std::shared_ptr<Module> clone() const override;

 protected:
  bool accepts_dim(int64_t dim) const override { return dim == 2 || dim == 3; }
  const char* expected_shape() const override { return "[N, C] or [N, C, L]"; }
};

class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNormBase(num_features, eps, momentum, affine) {}
  std::string type_name() const override { return "BatchNorm2d"; }
  std::shared_ptr<Module> clone() const override;

 protected:
  bool accepts_dim(int64_t dim) const override { return dim == 4; }
  const char* expected_shape() const override { return "[N, C, H, W]"; }
};

}  // namespace tandem::nn
