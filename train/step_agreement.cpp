// The per-step agreement of the ranks: every feature's share of one vector, summed once.
#include "train/step_agreement.h"

#include <algorithm>

#include "train/trainer.h"
#include "runtime/trace.h"

namespace tandem::train {

size_t StepAgreement::add(size_t size, Fill fill) {
  shares_.push_back({values_.size(), std::move(fill)});
  values_.resize(values_.size() + size);
  return shares_.size() - 1;
}

void StepAgreement::agree(const World& world) {
  std::fill(values_.begin(), values_.end(), 0.0);
  for (auto& s : shares_) s.fill(values_.data() + s.offset);
  trace::TraceSpan span("step_agreement");
  world.sum(values_);
}

}  // namespace tandem::train
