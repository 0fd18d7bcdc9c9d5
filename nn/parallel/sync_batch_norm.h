// SyncBatchNorm: batch normalisation whose training statistics span every rank of a communicator:
// per-rank Welford (count, mean, M2) all-gathered and merged in rank order in forward, sum_dy and
// sum_dy_xmu all-reduced in backward; running statistics from the global unbiased variance. A rank
// with an empty batch still takes part (count 0). Eval uses the running statistics, as BatchNorm.
// The weight/bias gradients are the rank's own (PyTorch's convention): DDP averages them.
#pragma once
#include <memory>

#include "comm/communicator.h"
#include "nn/layers/batch_norm.h"

namespace tandem::nn::parallel {

class SyncBatchNorm : public BatchNormBase {
 public:
  SyncBatchNorm(int64_t num_features, std::shared_ptr<comm::Communicator> comm, double eps = 1e-5,
                double momentum = 0.1, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SyncBatchNorm"; }
  std::shared_ptr<Module> clone() const override;  // shares the communicator
  comm::Communicator& communicator() { return *comm_; }

  // Takes over a BatchNorm's parameters and buffers (the same tensors, not copies).
  static std::shared_ptr<SyncBatchNorm> from_batch_norm(BatchNormBase& bn, std::shared_ptr<comm::Communicator> comm);

 protected:
  bool accepts_dim(int64_t dim) const override { return dim >= 2; }
  const char* expected_shape() const override { return "[N, C, ...]"; }

 private:
  std::shared_ptr<comm::Communicator> comm_;
};

// Replaces every BatchNorm1d/2d in `module` (recursively) by a SyncBatchNorm over `comm` sharing its
// parameters and buffers. Returns `module`, or the replacement when `module` itself is a BatchNorm.
// Collectives of SyncBatchNorm run inside forward and backward: give it a communicator of its own
// (not DDP's) when find_unused_parameters may make ranks launch DDP buckets at different moments.
std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               std::shared_ptr<comm::Communicator> comm);

// The functional form: x [N, C, ...] normalised with statistics over all ranks of `comm`; running
// stats (optional) updated in place. Differentiable in x, weight, bias.
Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                       Tensor running_var, comm::Communicator& comm, double momentum = 0.1, double eps = 1e-5);

}  // namespace tandem::nn::parallel
