// The hierarchical all-reduce: the node's ring, the rail's ring, the node's ring again.
#include "comm/hierarchy.h"

namespace tandem::comm {

Hierarchy::Hierarchy(Transport& node, Transport& rail, int64_t segment_bytes)
    : node_(node), rail_(rail), node_ring_(node, segment_bytes), rail_ring_(rail, segment_bytes) {}

void Hierarchy::allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  const int L = node_.size(), N = rail_.size();
  if (count == 0 || L * N == 1) return;
  const DType wdt = is_low_precision(dtype) ? DType::f32 : dtype;
  const size_t esz = dtype_size(wdt);
  char* data = static_cast<char*>(buf);
  if (wdt != dtype) {  // f16/bf16: widened once, summed in f32 through all three phases, rounded once
    data = static_cast<char*>(wide_.get(node_, static_cast<size_t>(count) * esz));
    node_.convert(data, wdt, buf, dtype, count);
  }
  // Averages are sums until the end, divided once by the whole world's size.
  const ReduceOp sum_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  // Errors name the phase (and the job's ranks: the transports report as the job's, report_as).
  OpInfo in_node = info, across = info;
  in_node.phase = "the hierarchical all-reduce's steps inside the node";
  across.phase = "the hierarchical all-reduce's step across the nodes";
  node_.announce(info.seq);
  rail_.announce(info.seq);

  // Phase 1, inside the node (shared memory): the node's ring reduce-scatter. Local rank l ends
  // owning chunk l+1 of the L chunks, summed over the node's ranks starting at local rank l+1.
  node_ring_.reduce_scatter_in_place(data, count, wdt, sum_op, in_node);
  node_.complete(in_node);
  // Phase 2, across nodes: the ring all-reduce of that chunk over the rail (one rank per node,
  // each holding its node's sum): sub-chunk d of N summed over the nodes starting at node d.
  const int owned = Communicator::owned_chunk(node_.rank(), L);
  const int64_t lo = Communicator::chunk_begin(count, L, owned);
  const int64_t hi = Communicator::chunk_begin(count, L, owned + 1);
  char* chunk = data + static_cast<size_t>(lo) * esz;
  rail_ring_.allreduce(chunk, hi - lo, wdt, sum_op, across);
  rail_.complete(across);
  if (op == ReduceOp::Avg && hi > lo) node_.divide(chunk, hi - lo, wdt, L * N);
  // Phase 3, inside the node: every local rank's finished chunk to every local rank.
  node_ring_.allgather_in_place(data, count, wdt, in_node);
  node_.complete(in_node);
  if (wdt != dtype) node_.convert(buf, dtype, data, wdt, count);
}

}  // namespace tandem::comm
