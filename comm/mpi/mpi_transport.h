// The MPI transport: nonblocking point-to-point on a private duplicate of the host's communicator,
// polled against the deadline; a node-shared "started collective" board names missing ranks, and
// across nodes a roll call at the deadline does.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/mpi/doorbell.h"
#include "comm/mpi/shm_channels.h"
#include "comm/mpi/shm_direct.h"

#include "comm/transport.h"

namespace tandem::comm {

class MpiTransport final : public Transport {
 public:
  // Duplicates host. use_shm: exchange through shared memory when all ranks share a node.
  // node: this rank's node, any number the ranks of one node share (default: MPI_Comm_split_type's
  // nodes); bytes sent to ranks of other nodes are counted (cross_node_bytes). machine_ranks: the
  // job's ranks on this machine's CPUs where more than host's ranks on this node (the hierarchy's
  // parts of the job; namespace "nodes" of one machine): waits yield when they outnumber the cores.
  MpiTransport(MPI_Comm host, bool use_shm, int node = -1, int machine_ranks = 0)
      : MpiTransport(host, use_shm, node, machine_ranks, nullptr) {}
  // A transport over part of job's ranks (part: a communicator split from job's; the hierarchy's
  // node and rail): its deadlines read as job's (Transport::report_as), whose roll call names the
  // missing ranks, so it holds no roll call of its own.
  MpiTransport(MPI_Comm part, MpiTransport& job, bool use_shm, int node, int machine_ranks)
      : MpiTransport(part, use_shm, node, machine_ranks, &job) {}
  bool uses_shared_memory() const { return shm_ != nullptr; }
  ~MpiTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const { return comm_; }

  void send(const void* src, size_t bytes, int peer) override;
  void recv(void* dst, size_t bytes, int peer) override;
  void recv_uncached(void* dst, size_t bytes, int peer) override;
  int64_t preferred_segment_bytes() const override;
  bool can_recv_reduce() const override { return shm_ != nullptr; }
  void recv_reduce(void* dst, size_t bytes, int peer, DType dtype, ReduceOp op) override;
  void wait(const OpInfo& op) override;
  void set_caller_waiting(bool waiting) override {
    if (bells_) bells_->set_owner_idle(waiting);
  }

  // Bytes this transport has sent to ranks on other nodes since it was made (point-to-point only:
  // what MPI's own collectives move is not seen).
  uint64_t cross_node_bytes() const { return cross_node_bytes_.load(std::memory_order_relaxed); }

  void announce(uint64_t seq) override;
  std::vector<int> lagging_ranks(uint64_t seq) override;

  // make_buffer's memory: a collective shared allocation (data nullptr without shared memory).
  ShmDirect::Block allocate_shared(size_t bytes);
  // The direct all-reduce where buf lies in make_buffer memory (false: not applicable, run the
  // ring). Throws CommError at the deadline or when the ranks disagree.
  bool direct_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);

  // Polls one collective request (MPI_I*) until done or op.deadline (then throws CommError).
  void wait_request(MPI_Request& req, const OpInfo& op);
  void mark_broken() { broken_ = true; }

 private:
  MpiTransport(MPI_Comm host, bool use_shm, int node, int machine_ranks, MpiTransport* job);
  // Spins on test() with backoff (yield, then short sleeps) until it returns true or the deadline.
  template <class Test>
  bool poll(Test&& test, Clock::time_point deadline);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> reqs_;
  std::vector<int> peers_;
  bool broken_ = false;
  bool oversubscribed_ = false;  // more ranks on this node than cores: yield at once when waiting
  std::vector<int> node_of_;    // each rank's node
  std::atomic<uint64_t> cross_node_bytes_{0};
  // Board: one cache line per rank in an MPI_Win_allocate_shared window, when all ranks share a node.
  MPI_Win board_win_ = MPI_WIN_NULL;
  std::vector<std::atomic<uint64_t>*> board_;
  // Without a board (the ranks span nodes): the roll call's own communicator (lagging_ranks), and
  // the numbers it sends and receives, kept here since a message to or from a dead rank may stay
  // pending after the call returns.
  MPI_Comm roll_call_comm_ = MPI_COMM_NULL;
  uint64_t roll_call_mine_ = 0;
  std::vector<uint64_t> roll_call_theirs_;
  std::unique_ptr<Doorbells> bells_;  // with shm_: how waits sleep until a peer moves
  std::unique_ptr<ShmChannels> shm_;
  std::unique_ptr<ShmDirect> direct_;
  // The collective # of the all-reduce now running the ring beside direct_ (its waits check that
  // no peer reduces shared memory in it).
  uint64_t ring_allreduce_seq_ = UINT64_MAX;
};

}  // namespace tandem::comm
