// Cross-rank metric reduction over a tiny f64 all-reduce (exact for counts below 2^53).
#include "nn/parallel/metrics.h"

#include <vector>

namespace tandem::nn::parallel {

namespace {
std::vector<double> allreduce_values(comm::Communicator& comm, std::vector<double> v, comm::ReduceOp op) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64, comm.device());
  comm.allreduce(t.data_ptr(), t.numel(), DType::f64, op)->wait();
  return t.to_vector<double>();
}
}  // namespace

MetricSums allreduce_metrics(comm::Communicator& comm, const MetricSums& local) {
  auto v = allreduce_values(comm, {local.loss_sum, static_cast<double>(local.correct), static_cast<double>(local.count)},
                            comm::ReduceOp::Sum);
  MetricSums out;
  out.loss_sum = v[0];
  out.correct = static_cast<int64_t>(v[1]);
  out.count = static_cast<int64_t>(v[2]);
  return out;
}

double allreduce_mean(comm::Communicator& comm, double value) {
  return allreduce_values(comm, {value}, comm::ReduceOp::Sum)[0] / comm.size();
}

double allreduce_max(comm::Communicator& comm, double value) {
  return allreduce_values(comm, {value}, comm::ReduceOp::Max)[0];
}

}  // namespace tandem::nn::parallel
