// RingCommunicator: the Communicator over a host-synchronous Transport (mpi, local). It validates
// arguments, queues each call on the executor, numbers collectives, applies the deadline, runs the
// debug desync check, and runs our ring or, with Algo::Native, the backend's own collective.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/executor.h"
#include "comm/flight_recorder.h"
#include "comm/ring.h"
#include "comm/transport.h"

namespace tandem::comm {

enum class CollectiveKind : int32_t {
  Allreduce = 1, ReduceScatter, Allgather, Broadcast, Barrier, ReduceScatterChunks, AllgatherChunks
};
const char* collective_name(CollectiveKind k);

// What one rank calls; compared across ranks by the desync check.
struct CallDesc {
  int32_t kind = 0;
  int32_t dtype = 0;
  int64_t count = 0;
  int32_t op = 0;
  int32_t root = -1;
  uint64_t seq = 0;
  bool operator==(const CallDesc& o) const {
    return kind == o.kind && dtype == o.dtype && count == o.count && op == o.op && root == o.root && seq == o.seq;
  }
  std::string str() const;
};

class RingCommunicator : public Communicator {
 public:
  ~RingCommunicator() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }
  std::string backend_name() const override { return backend_; }
  const Options& options() const { return opts_; }

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;
  WorkPtr allreduce(void* buf, int64_t count, DType dtype, ReduceOp op) override;
  WorkPtr reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op) override;
  WorkPtr allgather(const void* send, void* recv, int64_t send_count, DType dtype) override;
  WorkPtr broadcast(void* buf, int64_t count, DType dtype, int root) override;
  WorkPtr reduce_scatter_chunks(void* buf, int64_t count, DType dtype, ReduceOp op) override;
  WorkPtr allgather_chunks(void* buf, int64_t count, DType dtype) override;
  WorkPtr send(const void* buf, int64_t count, DType dtype, int peer) override;
  WorkPtr recv(void* buf, int64_t count, DType dtype, int peer) override;
  WorkPtr barrier() override;

 protected:
  RingCommunicator(Options opts, Device device, std::string backend);
  // Called by the derived constructor once its transport exists.
  void start(std::unique_ptr<Transport> transport, bool use_thread);
  // Derived destructors call it first: runs queued work, stops the thread, drops the transport.
  void stop();
  Transport& transport() { return *transport_; }
  bool broken() const { return executor_ && executor_->broken(); }

  // The backend's own collectives for Algo::Native; return false where there is none (the ring
  // runs instead). They run on the executor like the ring and must honour info.deadline.
  virtual bool native_allreduce(void*, int64_t, DType, ReduceOp, const OpInfo&) { return false; }
  virtual bool native_reduce_scatter(const void*, void*, int64_t, DType, ReduceOp, const OpInfo&) { return false; }
  virtual bool native_allgather(const void*, void*, int64_t, DType, const OpInfo&) { return false; }
  virtual bool native_broadcast(void*, int64_t, DType, int, const OpInfo&) { return false; }
  virtual bool native_barrier(const OpInfo&) { return false; }
  // An all-reduce the backend can do without the ring for this buffer (mpi: make_buffer memory
  // shared by the node's ranks); false: the ring runs. Runs on the executor, with Algo::Ring.
  virtual bool direct_allreduce(void*, int64_t, DType, ReduceOp, const OpInfo&) { return false; }
  // The backend's hierarchical all-reduce where it chose one (Algo::Auto on several nodes, or
  // Algo::Hierarchical); false: none, the direct sum or the ring runs. Runs on the executor.
  virtual bool hierarchical_allreduce(void*, int64_t, DType, ReduceOp, const OpInfo&) { return false; }
  // The issuing thread blocks on (true) or leaves (false) its collectives (Executor's wait hook):
  // tells the transport; a backend with more transports tells them all.
  virtual void caller_waiting(bool waiting) { transport_->set_caller_waiting(waiting); }
  // Runs fn on the executor, after the work queued before it (collective setup that must keep the
  // issue order, such as allocating a shared window), and waits for it.
  void run_in_order(std::function<void()> fn);
  // Called on the caller's thread when a call is queued; what it returns runs on the executor
  // before the call's communication. Stream-ordered backends (nccl) order their stream after the
  // work the caller already queued on its compute stream, which produced the buffers.
  virtual std::function<void()> order_after_caller() { return {}; }

 private:
  WorkPtr launch(CallDesc desc, std::function<void(const OpInfo&)> body);
  WorkPtr point_to_point(const char* name, bool is_send, void* buf, int64_t count, DType dtype, int peer);
  void check_desync(const CallDesc& mine, const OpInfo& info);
  void check_args(const char* what, int64_t count, DType dtype) const;
  // allreduce and reduce_scatter_chunks: the backend's collective, the hierarchy or the direct sum
  // over the whole buffer; false where none applies (the ring's phases run).
  bool whole_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info);

  Options opts_;
  Device device_;
  std::string backend_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Ring> ring_;
  std::shared_ptr<Executor> executor_;
  Scratch desync_buf_;    // the desync check's descriptors, in transport memory
  uint64_t seq_ = 0;      // collectives started (executor thread only)
  uint64_t p2p_seq_ = 0;  // sends/recvs started
  FlightRecorder flight_;  // the last collectives, dumped on the first CommError
  std::atomic<bool> flight_dumped_{false};
};

}  // namespace tandem::comm
