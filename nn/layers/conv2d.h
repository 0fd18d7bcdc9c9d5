// Conv2d (NCHW): weight [out, in, k, k], bias [out]; PyTorch's default init
// (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in * k * k, weight drawn first).
#pragma once
#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

class Conv2d : public Cloneable<Conv2d> {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;  // [N, in, H, W] -> [N, out, Ho, Wo]
  std::string type_name() const override { return "Conv2d"; }
  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  int64_t kernel_size() const { return k_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return pad_; }
  void reset_parameters(Generator& gen);

 private:
  int64_t in_, out_, k_, stride_, pad_;
  bool has_bias_;
};

}  // namespace tandem::nn
