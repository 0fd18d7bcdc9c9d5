// The ring algorithms, written once over a Transport: all-reduce (reduce-scatter then all-gather),
// reduce-scatter, all-gather, a pipelined chain broadcast and a barrier. Chunked and pipelined;
// every addition happens in a fixed order, so all ranks end bitwise identical and reruns repeat.
#pragma once
#include <cstdint>

#include "comm/transport.h"

namespace tandem::comm {

class Ring {
 public:
  // segment_bytes: the unit of pipelining (one message); 0 picks the transport's preference.
  Ring(Transport& t, int64_t segment_bytes);

  void allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);
  void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                      const OpInfo& info);
  void allgather(const void* send, void* recv, int64_t send_count, DType dtype, const OpInfo& info);
  // allreduce's two phases apart, in place (Communicator::reduce_scatter_chunks/allgather_chunks):
  // rank r owns chunk r+1, reduced by exactly allreduce's additions. Where allreduce would take
  // recursive doubling (small buffers, 4, 8, ... ranks) the reduce-scatter runs it too, whole: the
  // owned chunk is then bitwise allreduce's as well.
  void reduce_scatter_in_place(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);
  void allgather_in_place(void* buf, int64_t count, DType dtype, const OpInfo& info);
  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpInfo& info);
  void barrier(const OpInfo& info);

 private:
  // allreduce and reduce_scatter_in_place: the all-gather phase or not.
  void allreduce_phases(void* buf, int64_t count, DType dtype, ReduceOp op, bool gather, const OpInfo& info);

  // The core loop: reduce-scatter and/or all-gather passes over `buf` (count elements of dtype,
  // split into size() balanced chunks). Reduce-scatter step s sends chunk (q-s) and receives chunk
  // (q-s-1), so after it rank r owns the fully reduced chunk q+1; all-gather step s sends chunk
  // (o-s), where o is the chunk this rank owns, and receives chunk (o-s-1).
  void passes(char* buf, int64_t count, DType dtype, ReduceOp op, int q, bool do_rs, bool do_ag,
              const OpInfo& info);

  // Small buffers on a power-of-two number (> 2) of ranks: recursive doubling, log2(n) exchanges of
  // the whole buffer instead of 2(n-1) ring steps. Partners add the same two partial sums (IEEE
  // addition commutes), so all ranks still end bitwise identical, and reruns repeat.
  void recursive_doubling(char* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);

  Transport& t_;
  int64_t segment_bytes_;
  Scratch recv_tmp_[2];  // double-buffered landing zone of received reduce-scatter segments
  Scratch wide_;         // f32 copy of f16/bf16 data (sums accumulate in f32)
  Scratch work_;         // reduce-scatter working copy of the send buffer
  Scratch token_;        // the barrier's token
  Scratch partner_;      // recursive doubling: the partner's partial sum
};

}  // namespace tandem::comm
