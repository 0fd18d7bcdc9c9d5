// Identity: returns its input. Holds the place of a module fused into its neighbour
// (Sequential::fuse_batchnorm_epilogues), so that the other children keep their names.
#pragma once
#include "nn/module.h"

namespace tandem::nn {

class Identity : public Cloneable<Identity> {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace tandem::nn
