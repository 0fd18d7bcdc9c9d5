// Dropout: inverted dropout with probability p in training, identity in eval. The mask draws from
// the generator given at construction (default: the process-wide one), which must outlive the module.
#pragma once
#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

class Dropout : public Cloneable<Dropout> {
 public:
  explicit Dropout(double p = 0.5, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace tandem::nn
