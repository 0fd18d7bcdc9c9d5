// Metrics across ranks: per-rank sums reduced over the communicator, so that validation loss and
// accuracy count every sample of the (sharded, unpadded: see eval_shard) test set exactly once.
#pragma once
#include <cstdint>

#include "comm/communicator.h"

namespace tandem::nn::parallel {

struct MetricSums {
  double loss_sum = 0;  // sum of per-sample losses
  int64_t correct = 0;
  int64_t count = 0;
  double mean_loss() const { return count ? loss_sum / static_cast<double>(count) : 0.0; }
  double accuracy() const { return count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
};

// Sums of every rank (collective; every rank gets the totals).
MetricSums allreduce_metrics(comm::Communicator& comm, const MetricSums& local);
// The average over ranks of one value per rank (e.g. a training loss for logging).
double allreduce_mean(comm::Communicator& comm, double value);
double allreduce_max(comm::Communicator& comm, double value);

}  // namespace tandem::nn::parallel
