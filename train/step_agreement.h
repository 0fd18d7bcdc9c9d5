// StepAgreement: the one small all-reduce per training step that carries every per-step decision the
// ranks must take together (out of memory, a non-finite loss, SIGTERM), instead of one each.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace tandem::train {

struct World;

// Each feature that needs the ranks to agree on something every step takes a share of one vector of
// doubles. The Trainer runs the agreement after each attempt of a step's forward and backward, before
// the optimizer step (where out-of-memory recovery must decide): it fills every share with this rank's
// values and sums the vector over the ranks once. Tiny all-reduces cost latency, not bandwidth, so
// three of them cost about three times one. The shares must be added in the same order on every rank
// (the vector's layout is positional), before fit().
class StepAgreement {
 public:
  // Writes this rank's values into its share, which is zeroed before each agreement.
  using Fill = std::function<void(double* share)>;
  // Reserves `size` values filled by `fill`; returns the share's id for sum().
  size_t add(size_t size, Fill fill);
  // No shares: no feature needs an agreement, so the Trainer runs none.
  bool empty() const { return shares_.empty(); }
  // Fills every share and sums the vector over `world` (one all-reduce; none with one rank).
  void agree(const World& world);
  // Share `id` summed over the ranks, as of the latest agree().
  const double* sum(size_t id) const { return values_.data() + shares_.at(id).offset; }

 private:
  struct Share {
    size_t offset;
    Fill fill;
  };
  std::vector<Share> shares_;
  std::vector<double> values_;
};

}  // namespace tandem::train
