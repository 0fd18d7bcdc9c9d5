// Coalesced collectives over lists of tensors: tensors of one (dtype, device) are packed into one
// flat buffer so that a list of many small tensors (parameters, BN buffers) costs one collective
// per group instead of one per tensor.
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "runtime/tensor.h"

namespace tandem::nn::parallel {

// Tensors split into groups of one dtype and device, each in first-appearance order.
struct TensorGroup {
  DType dtype;
  Device device;
  std::vector<size_t> members;  // indices into the input list
  int64_t numel = 0;
};
std::vector<TensorGroup> group_by_dtype_device(const std::vector<Tensor>& tensors);

// Overwrites every tensor with root's values: one broadcast per (dtype, device) group, blocking.
// Every rank must pass tensors of the same shapes in the same order.
void broadcast_coalesced(comm::Communicator& comm, const std::vector<Tensor>& tensors, int root);

// In place: every tensor becomes the reduction over ranks (blocking, one all-reduce per group).
void allreduce_coalesced(comm::Communicator& comm, const std::vector<Tensor>& tensors,
                         comm::ReduceOp op = comm::ReduceOp::Sum);

}  // namespace tandem::nn::parallel
