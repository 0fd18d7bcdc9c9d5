// Shared-memory channels between the ranks of one node, in an MPI_Win_allocate_shared window: one
// bounded queue of slots per ordered pair of ranks. Two modes:
//  - copy: a sender copies pieces of its message into free slots; the receiver copies them out, or
//    reduces straight from them into its buffer;
//  - cma (Linux cross-memory attach, where permitted): a sender only publishes its buffer's address;
//    the receiver reads it with process_vm_readv (one copy, none on the sender's core) and tells the
//    sender when done; used for messages of at least cma_min_bytes (a system call per message
//    costs more than copying a small one). Env TANDEM_COMM_CMA=0 forces copy mode.
// Both sides pick the mode from the message size, so one channel's entries (data pieces or
// address descriptors) are consumed in the order they were published. Every change to a channel
// rings the peer's doorbell, so a rank waiting for its channels can sleep (Doorbells::wait_until).
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace tandem::comm {

class Doorbells;
class Transport;

class ShmChannels {
 public:
  // Collective over comm, whose ranks must all share one node.
  ShmChannels(MPI_Comm comm, int rank, int size, Doorbells& bells, size_t slot_bytes = 64 * 1024, int slots = 8,
              size_t cma_min_bytes = 1024 * 1024);
  ShmChannels(const ShmChannels&) = delete;
  ShmChannels& operator=(const ShmChannels&) = delete;

  void post_send(const void* src, size_t bytes, int peer);
  // uncached: copy out of the slots with non-temporal stores (copy mode only).
  void post_recv(void* dst, size_t bytes, int peer, bool uncached = false);
  void post_recv_reduce(void* dst, size_t bytes, int peer, DType dtype, ReduceOp op);
  // Moves whatever can move now; true once everything posted is done. `reducer` does the
  // arithmetic of fused receives. Throws CommError when a piece's size disagrees (desync).
  bool progress(Transport& reducer);
  // The peers of unfinished operations; clears them (after a deadline).
  std::vector<int> abandon();
  bool uses_cma() const { return cma_; }

 private:
  struct Header {  // one per channel, at the start of its memory; counters on their own lines
    alignas(64) std::atomic<uint64_t> head;  // pieces published by the sender
    alignas(64) std::atomic<uint64_t> tail;  // pieces consumed by the receiver
    alignas(64) uint64_t sizes[64];          // byte size of the piece in each slot
    uint64_t addrs[64];                      // cma: the sender's buffer address of each message
  };
  struct Op {
    bool send;
    char* ptr;
    size_t bytes, done;
    int peer;
    bool reduce;
    DType dtype;
    ReduceOp op;
    bool cma = false;        // moved by cross-memory attach (large messages) or through slots
    bool published = false;  // cma send: address is in the channel as entry number `seq`
    uint64_t seq = 0;
    bool uncached = false;   // copy-mode receive: non-temporal stores into ptr
  };
  Header* channel(int src, int dst) const;
  char* slot(Header* h, uint64_t i) const;
  bool advance(Op& o, Transport& reducer);
  bool advance_cma(Op& o, Transport& reducer);
  void read_remote(int peer, void* dst, uint64_t remote_addr, size_t bytes);

  int rank_, size_;
  Doorbells& bells_;
  size_t slot_bytes_;
  int slots_;
  size_t channel_bytes_;
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<char*> base_;  // each rank's window segment
  std::vector<Op> ops_;
  bool cma_ = false;
  size_t cma_min_bytes_;
  std::vector<int> pids_;           // cma: each rank's process id
  std::vector<uint64_t> landing_;   // cma: where fused receives land before they are reduced
};

}  // namespace tandem::comm
