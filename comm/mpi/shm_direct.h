// The direct all-reduce of the ranks of one node, over buffers that live in shared memory
// (Communicator::make_buffer): every rank maps every peer's buffer, so no byte goes through a
// channel. The buffer is cut into pieces; whichever rank is free takes the next piece, sums it
// over all ranks' buffers and writes the sum into all of them. One pass over the data instead of
// the ring's copies, and a rank that is waiting for a slower peer does the work meanwhile.
// Each element is summed in the ring's order (chunk c of n starts at rank c and goes around), so
// the result is bitwise the ring's, identical on every rank and across reruns, whoever sums it.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/mpi/doorbell.h"
#include "comm/transport.h"

namespace tandem::comm {

class ShmDirect {
 public:
  // Collective over comm, whose ranks must all share one node.
  ShmDirect(MPI_Comm comm, int rank, int size, Doorbells& bells);
  ShmDirect(const ShmDirect&) = delete;
  ShmDirect& operator=(const ShmDirect&) = delete;

  // This rank's part of a shared buffer, and the token that keeps the buffer taken: when the last
  // copy of the token goes (the last tensor over the buffer), the buffer is free again.
  struct Block {
    void* data = nullptr;
    std::shared_ptr<void> token;
  };
  // Collective (same bytes on every rank, in the same order): a zeroed shared buffer of at least
  // `bytes`. The smallest buffer that is big enough and free on every rank is reused, else a new
  // window is made. Windows stay until MPI_Finalize (MPI_Win_free is collective, and a rank must
  // not block in it), so memory grows only to the most that is taken at once.
  Block allocate(size_t bytes);
  enum class Outcome {
    Plain,   // buf is not in a buffer from allocate() (or dtype is not summed here): run the ring
    Done,    // reduced in place
    Missed,  // the deadline passed; `missing` names the ranks that never arrived
  };
  // All-reduce in place of a range of a buffer from allocate() (the same buffer, offset and count
  // on every rank). Throws CommError when the ranks disagree about the call. For Plain it has
  // said so to the peers; the ring's waits then call check_no_direct_peer, so that a rank passing
  // plain memory while its peers pass make_buffer memory fails every rank within 100 ms instead
  // of at the deadline (throws CommError).
  Outcome allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, uint64_t seq, Clock::time_point deadline,
                    std::vector<int>& missing);
  void check_no_direct_peer(uint64_t seq) const;

 private:
  static constexpr int64_t kPlain = -1;  // Arrival::buffer of a rank that runs the ring instead
  struct Arrival {  // one per rank: what it is reducing in collective `seq` (see publish)
    alignas(64) std::atomic<uint64_t> seq;
    std::atomic<uint64_t> version;  // odd while the fields change
    std::atomic<int64_t> buffer, offset, count;
    std::atomic<int32_t> dtype, op;
  };
  struct Fields {  // what an arrival says, as plain values
    int64_t buffer, offset, count;
    int32_t dtype, op;
    bool operator==(const Fields& o) const {
      return buffer == o.buffer && offset == o.offset && count == o.count && dtype == o.dtype && op == o.op;
    }
  };
  struct Counters {  // in rank 0's segment; pieces are numbered on across collectives
    alignas(64) std::atomic<uint64_t> next;  // the next piece to take
    alignas(64) std::atomic<uint64_t> done;  // pieces finished
  };
  struct Buffer {
    MPI_Win win;
    size_t bytes;
    std::vector<char*> base;                  // each rank's segment
    std::shared_ptr<std::atomic<bool>> taken;  // cleared by the token, from whichever thread drops it
  };
  // The buffer to hand out for `bytes`: the smallest one big enough and free on every rank (each
  // rank's view gathered, so all pick the same), or -1.
  int64_t reusable(size_t bytes) const;
  struct Range {
    int64_t buffer = -1, offset = 0;  // buffer -1: in none of ours
  };
  // Which buffer of ours holds [p, p + bytes), at which byte offset.
  Range locate(const void* p, size_t bytes) const;
  Arrival* arrival(int r) const { return arrivals_[static_cast<size_t>(r)]; }
  void publish(uint64_t seq, const Fields& f);
  // Peer r's arrival for collective `seq`, read whole (never half of the next one); false when
  // the peer's latest arrival is another collective's.
  bool arrival_for(int r, uint64_t seq, Fields& f) const;
  void reduce_piece(const std::vector<char*>& x, int64_t count, DType dtype, ReduceOp op, int64_t piece_elems,
                    int64_t pieces_per_chunk, uint64_t piece);

  MPI_Comm comm_;
  int rank_, size_;
  Doorbells& bells_;
  MPI_Win control_win_ = MPI_WIN_NULL;
  std::vector<Arrival*> arrivals_;
  Counters* counters_ = nullptr;
  std::vector<Buffer> buffers_;
  uint64_t first_piece_ = 0;  // of the next collective (the same on every rank)
};

}  // namespace tandem::comm
