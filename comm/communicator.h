// The communicator interface: rank, size and about ten async collectives over raw buffers (and
// Tensor conveniences), plus the factories for the in-process groups (host memory, and NCCL).
// Factories taking MPI types live in comm/mpi/mpi_comm.h and comm/nccl/nccl_comm.h, so that code
// including this header needs neither mpi.h nor nccl.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace tandem::comm {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min"

// A pending collective. wait() blocks until it finished (or throws CommError on a deadline or a
// failure); is_completed() polls. Waiting twice is allowed; the second wait returns at once (or
// rethrows the same error).
class Work {
 public:
  virtual ~Work();
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

struct Options {
  // Ring: our flat ring all-reduce over all ranks (reduce-scatter then all-gather, fixed addition
  // order, bitwise identical on every rank). Hierarchical (mpi backend): reduce-scatter inside each
  // node through shared memory, a ring across the nodes, all-gather inside the node (comm/hierarchy.h);
  // also bitwise identical on every rank, but other bits than the flat ring's. Auto: Hierarchical
  // where the job spans 2 or more nodes with the same number (2 or more) of ranks on each, else Ring.
  // Native: the library's collective (MPI_Allreduce, ncclAllReduce). Backends without a hierarchy
  // (local, nccl) run the ring for Auto and Hierarchical.
  enum class Algo { Auto, Ring, Hierarchical, Native } algo = Algo::Auto;
  // Deadline of every blocking wait, seconds. Env TANDEM_COMM_TIMEOUT overrides when set.
  double timeout_s = 300;
  // Before each collective, check that all ranks call the same one with the same count, dtype and
  // op; names the ranks that differ. Env TANDEM_DEBUG_DESYNC=1 turns it on.
  bool debug_desync = false;
  // Bytes per pipelined ring segment (0: the backend's default).
  int64_t segment_bytes = 0;
  // mpi backend: when all ranks share one node, move data through an MPI_Win_allocate_shared
  // window (a rank reduces straight from its neighbour's memory) instead of MPI point-to-point.
  // Env TANDEM_COMM_SHM=0 turns it off.
  bool shared_memory = true;

  // Options with the environment overrides applied (TANDEM_COMM_TIMEOUT, TANDEM_DEBUG_DESYNC,
  // TANDEM_COMM_ALGO=auto|ring|hierarchical|native, TANDEM_COMM_SHM=0|1). The factories call it; callers need not.
  Options with_env() const;
};

// Errors: every failure is thrown as CommError (runtime/error.h) naming the collective, its
// sequence number and the ranks involved. A rank that got a CommError must not go on using the
// communicator (peers may be blocked in a half-finished collective); an MPI program should end the
// job with MPI_Abort(MPI_COMM_WORLD, 1) (see comm/mpi/mpi_comm.h: abort_job) so mpirun does not hang.
class Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;  // where its buffers live (cpu for mpi/local, cuda:k for nccl)
  virtual std::string backend_name() const { return "custom"; }  // "mpi", "local", "nccl"

  // Raw buffers of `count` elements of dtype, in place where one buffer is given. Async: wait() on
  // the Work. Buffers must stay alive and untouched until the Work completes. Collectives on one
  // communicator must be issued in the same order on every rank (they run in issue order).
  virtual WorkPtr allreduce(void* buf, int64_t count, DType dtype, ReduceOp op) = 0;
  // send holds size()*recv_count elements; rank r receives the reduced block r.
  virtual WorkPtr reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype,
                                 ReduceOp op) = 0;
  // recv holds size()*send_count elements, block r from rank r.
  virtual WorkPtr allgather(const void* send, void* recv, int64_t send_count, DType dtype) = 0;
  virtual WorkPtr broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  // Point-to-point. Works on one communicator complete in issue order and a send may wait until
  // the peer receives (as MPI_Ssend), so order exchanges (e.g. even ranks send first).
  virtual WorkPtr send(const void* buf, int64_t count, DType dtype, int peer) = 0;
  virtual WorkPtr recv(void* buf, int64_t count, DType dtype, int peer) = 0;
  virtual WorkPtr barrier() = 0;

  // The two halves of allreduce(buf, count, dtype, op), in place, for ZeRO (nn/parallel/zero.h).
  // reduce_scatter_chunks: afterwards chunk owned_chunk(rank(), size()) of buf, the elements
  // [chunk_begin(count, n, c), chunk_begin(count, n, c + 1)), holds bitwise what allreduce would
  // have left there (the same algorithm chosen for the same buffer, the same additions in the same
  // order); the other chunks hold partial sums, or the full result where the backend reduced it all
  // (see RingCommunicator). allgather_chunks: every rank's owned chunk of buf copied to every rank.
  // The defaults: the whole all-reduce (correct, twice the traffic), and NotSupportedError.
  virtual WorkPtr reduce_scatter_chunks(void* buf, int64_t count, DType dtype, ReduceOp op);
  virtual WorkPtr allgather_chunks(void* buf, int64_t count, DType dtype);
  // The ring's chunks: balanced, the first ones shorter by one where count % n != 0.
  static int64_t chunk_begin(int64_t count, int n, int c) { return count * c / n; }
  // The chunk a rank holds reduced after the ring's reduce-scatter phase (comm/ring.h).
  static int owned_chunk(int rank, int n) { return (rank + 1) % n; }

  // Memory for buffers that are reduced again and again (DDP's gradient buckets): a zeroed 1-D
  // tensor of numel elements on device(). Where the backend can, it lives in memory every rank of
  // the node maps (mpi with all ranks on one node: a shared-memory window), and an allreduce over
  // it reduces in place, straight from every rank's buffer: no copies through channels. Collective:
  // every rank calls it in the same order with the same numel and dtype, and every rank must then
  // pass the same range of its buffer to such an allreduce. Plain memory elsewhere (the default).
  // Shared windows stay until MPI_Finalize; a buffer whose tensors are all gone is handed out
  // again (it must be free on every rank), so memory grows only to the most taken at once.
  virtual Tensor make_buffer(int64_t numel, DType dtype);

  // Non-virtual Tensor conveniences (check device/contiguity/dtype, then call the raw ones).
  WorkPtr allreduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
  WorkPtr broadcast(Tensor& t, int root);
  WorkPtr allgather(const Tensor& send, Tensor& recv);  // recv.numel() == size()*send.numel()
  WorkPtr reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op = ReduceOp::Sum);

 private:
  void check_tensor(const Tensor& t, const char* what) const;
};

// In-process: n communicators sharing memory, one per thread (the DataParallel backend). Each
// communicator must be driven by its own thread; device() of member k is cpu:k.
std::vector<std::shared_ptr<Communicator>> make_local_group(int n, Options = {});

// In-process over NCCL: member k on devices[k] (all cuda, distinct), one NCCL clique made by a single
// ncclCommInitAll; DataParallel's backend for cuda devices. As with make_local_group, each member
// must be driven by its own thread: NCCL may block a collective until every member has called it,
// so one thread calling several members in turn would wait on itself. Collectives are ordered after
// the work already queued on the member's compute stream (no host sync). NotSupportedError when
// built without CUDA (TANDEM_CUDA=OFF) or when a device is not one of the visible GPUs.
std::vector<std::shared_ptr<Communicator>> make_nccl_local_group(const std::vector<Device>& devices, Options = {});

// MPI: bootstraps from MPI_COMM_WORLD, initialising MPI only when it is not yet initialised (and
// then finalising it at exit). Throws NotSupportedError when built without MPI.
// The overload taking a host code's MPI_Comm is in comm/mpi/mpi_comm.h.
std::shared_ptr<Communicator> make_mpi_communicator(Options = {});

// The world communicator for tensors on `device`: MPI (host buffers) for a CPU device, NCCL for
// cuda:N (bootstrapped over MPI_COMM_WORLD; N must be the device NCCL takes for this rank, its
// local rank: see node_device()). NotSupportedError where the build lacks the backend.
std::shared_ptr<Communicator> make_world_communicator(Device device, Options = {});

// The device this process should train on: cuda:<local rank> where every rank on this node can have
// a GPU of its own (initialising MPI to learn the local rank when the job has several ranks), else
// the CPU.
Device node_device();

// The job size the launcher announces (OMPI_COMM_WORLD_SIZE, PMI_SIZE, srun's SLURM_STEP_NUM_TASKS or
// PMIX_SIZE; comm/launcher_env.h), read without initialising MPI; 1 when no launcher started the process.
int launcher_world_size();
// The job's ranks on this node as the launcher announces them (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE,
// MPICH's MPI_LOCALNRANKS, srun's SLURM_STEP_TASKS_PER_NODE), read without initialising MPI; 1 otherwise.
int launcher_local_size();

}  // namespace tandem::comm
