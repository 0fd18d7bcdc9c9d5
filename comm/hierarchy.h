// The hierarchical all-reduce, written once over two transports: the ranks of this rank's node
// (shared memory) and its rail (the ranks of the same local rank on every node, one per node).
// Reduce-scatter inside the node, an all-reduce of the owned chunk across the nodes, all-gather
// inside the node. Every addition in a fixed order: bitwise identical on every rank and across
// reruns, though not the flat ring's bits (comm/README.md, "Hierarchical all-reduce").
#pragma once
#include <cstdint>

#include "comm/ring.h"
#include "comm/transport.h"

namespace tandem::comm {

class Hierarchy {
 public:
  // node: the L ranks of this node, local rank = node.rank(). rail: the N ranks of local rank
  // node.rank(), one per node, the nodes in the same order on every rail. Every node has L ranks.
  Hierarchy(Transport& node, Transport& rail, int64_t segment_bytes);

  // In place, count elements of dtype (16-bit types summed in f32 and rounded once at the end).
  void allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);

  int nodes() const { return rail_.size(); }
  int ranks_per_node() const { return node_.size(); }

 private:
  Transport& node_;
  Transport& rail_;
  Ring node_ring_, rail_ring_;
  Scratch wide_;  // f32 copy of f16/bf16 data
};

}  // namespace tandem::comm
