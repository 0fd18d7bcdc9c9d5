// NCCL backend: a stream-ordered transport (grouped ncclSend/ncclRecv, device kernels for the
// arithmetic, a deadline on the stream's completion) under the shared ring, plus native NCCL
// collectives; initialised by the MPI bootstrap (a process per GPU) or ncclCommInitAll (one process).
#include "comm/nccl/nccl_comm.h"

#include <nccl.h>
#include <sched.h>

#include <vector>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_comm.h"
#include "comm/nccl/nccl_kernels.h"
#include "comm/ring_comm.h"
#include "runtime/backend/cuda/check.h"
#include "runtime/device_query.h"

namespace tandem::comm {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// Destroys an event on every path out of a scope (unless released by setting it to null).
struct EventOwner {
  cudaEvent_t event;
  ~EventOwner() {
    if (event) cudaEventDestroy(event);
  }
};

// Owns one initialised NCCL communicator (from the MPI bootstrap or ncclCommInitAll) and a stream of
// its own on the communicator's device.
class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, int device) : device_(device), nccl_(comm) {
    try {
      NCCL_CHECK(ncclCommUserRank(nccl_, &rank_));
      NCCL_CHECK(ncclCommCount(nccl_, &size_));
      CUDA_CHECK(cudaSetDevice(device_));
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    } catch (...) {
      release();
      throw;
    }
  }
  ~NcclTransport() override { release(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const { return device_; }
  ncclComm_t nccl() const { return nccl_; }
  cudaStream_t stream() const { return stream_; }

  void send(const void* src, size_t bytes, int peer) override { pending_.push_back({true, const_cast<void*>(src), bytes, peer}); }
  void recv(void* dst, size_t bytes, int peer) override { pending_.push_back({false, dst, bytes, peer}); }

  // Enqueues the posted sends and receives as one NCCL group on our stream. Completion (and the
  // deadline) is checked in complete(): everything after is ordered on the same stream.
  void wait(const OpInfo&) override {
    if (pending_.empty()) return;
    CUDA_CHECK(cudaSetDevice(device_));
    NCCL_CHECK(ncclGroupStart());
    for (const Pending& p : pending_) {
      if (p.is_send)
        NCCL_CHECK(ncclSend(p.ptr, p.bytes, ncclUint8, p.peer, nccl_, stream_));
      else
        NCCL_CHECK(ncclRecv(p.ptr, p.bytes, ncclUint8, p.peer, nccl_, stream_));
    }
    NCCL_CHECK(ncclGroupEnd());
    pending_.clear();
  }

  void complete(const OpInfo& op) override {
    CUDA_CHECK(cudaSetDevice(device_));
    for (uint64_t i = 0;; ++i) {
      cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(nccl_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        broken_ = true;
        TANDEM_FAIL(Comm, "rank {}: {} (collective #{}): NCCL reported {}", rank_, op.name, op.seq,
                    ncclGetErrorString(async));
      }
      if (Clock::now() > op.deadline) {
        broken_ = true;  // the destructor aborts the NCCL communicator, freeing the stuck kernels
        deadline_error(op, {});
      }
      if (i > 1000) sched_yield();
    }
  }

  void* alloc(size_t bytes) override {
    CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return p;
  }
  void free(void* p) override {
    cudaSetDevice(device_);
    cudaFree(p);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void upload(void* dst, const void* host_src, size_t bytes) override {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // host_src may be a temporary
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void reduce(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) override {
    ::tandem::cuda::nccl_kernels::reduce(dst, src, n, dtype, op, stream_);
  }
  void divide(void* buf, int64_t n, DType dtype, int divisor) override {
    ::tandem::cuda::nccl_kernels::divide(buf, n, dtype, divisor, stream_);
  }
  void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n) override {
    ::tandem::cuda::nccl_kernels::convert(dst, dst_dtype, src, src_dtype, n, stream_);
  }

 private:
  struct Pending { bool is_send; void* ptr; size_t bytes; int peer; };

  void release() noexcept {
    cudaSetDevice(device_);
    if (nccl_) {
      if (broken_)
        ncclCommAbort(nccl_);
      else
        ncclCommDestroy(nccl_);
      nccl_ = nullptr;
    }
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  int rank_ = 0, size_ = 1, device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  bool broken_ = false;
  std::vector<Pending> pending_;
};

// The communicator over one NcclTransport, whichever way its NCCL communicator was initialised.
class NcclCommunicator final : public RingCommunicator {
 public:
  NcclCommunicator(std::unique_ptr<NcclTransport> t, Options opts)
      : RingCommunicator(opts, Device(DeviceKind::CUDA, t->device()), "nccl") {
    nccl_ = t.get();
    start(std::move(t), /*use_thread=*/true);
  }
  ~NcclCommunicator() override { stop(); }

 protected:
  // Tensors handed in were produced by kernels queued on the device's compute stream (DDP's bucket
  // copies, say): the collective's stream waits for that point, without blocking the host.
  std::function<void()> order_after_caller() override {
    // native_stream makes the device current first, so the event is made on the stream's device
    // even when this thread last worked on another one.
    cudaStream_t compute = static_cast<cudaStream_t>(cuda::native_stream(device()));
    cudaEvent_t produced = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
    EventOwner owner{produced};
    CUDA_CHECK(cudaEventRecord(produced, compute));
    owner.event = nullptr;
    return [this, produced] {
      // Runs on the executor's thread (or a waiting caller's): everything after it in the call
      // (kernels, copies, NCCL) is queued with the communicator's device current.
      EventOwner destroy{produced};
      CUDA_CHECK(cudaSetDevice(device().index));
      CUDA_CHECK(cudaStreamWaitEvent(nccl_->stream(), produced, 0));
    };
  }

  // Native collectives: enqueued on the transport's stream; complete() applies the deadline.
  bool native_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo&) override {
    if (count)
      NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), nccl_->nccl(),
                               nccl_->stream()));
    return true;
  }
  bool native_reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                             const OpInfo&) override {
    if (recv_count)
      NCCL_CHECK(ncclReduceScatter(send, recv, static_cast<size_t>(recv_count), nccl_type(dtype), nccl_op(op),
                                   nccl_->nccl(), nccl_->stream()));
    return true;
  }
  bool native_allgather(const void* send, void* recv, int64_t send_count, DType dtype, const OpInfo&) override {
    if (send_count)
      NCCL_CHECK(ncclAllGather(send, recv, static_cast<size_t>(send_count), nccl_type(dtype), nccl_->nccl(),
                               nccl_->stream()));
    return true;
  }
  bool native_broadcast(void* buf, int64_t count, DType dtype, int root, const OpInfo&) override {
    if (count)
      NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(dtype), root, nccl_->nccl(),
                               nccl_->stream()));
    return true;
  }

 private:
  NcclTransport* nccl_ = nullptr;
};

}  // namespace

namespace {
// The MPI bootstrap: rank 0 makes the id, MPI carries it to everyone, each rank joins on `device`.
ncclComm_t init_over_mpi(MPI_Comm host, int device) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(host, &rank));
  MPI_CHECK(MPI_Comm_size(host, &size));
  CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, host));
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  return comm;
}
}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Options opts, int device) {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  TANDEM_CHECK(initialised, "make_nccl_communicator: MPI is not initialised; call MPI_Init_thread first");
  const int devices = cuda::device_count();
  TANDEM_CHECK_KIND(NotSupported, devices > 0,
                    "make_nccl_communicator: no CUDA device is visible; use make_mpi_communicator for host buffers");
  const int on_node = local_size(comm);
  TANDEM_CHECK_KIND(NotSupported, on_node <= devices,
                    "make_nccl_communicator: {} ranks on this node share {} CUDA device{}; NCCL needs a device per "
                    "rank: start at most {} rank{} per node, or use make_mpi_communicator for host buffers",
                    on_node, devices, devices > 1 ? "s" : "", devices, devices > 1 ? "s" : "");
  if (device < 0) device = local_rank(comm);
  TANDEM_CHECK_KIND(NotSupported, device < devices, "make_nccl_communicator: cuda:{} does not exist: this process sees "
                    "{} CUDA device{}", device, devices, devices == 1 ? "" : "s");
  auto transport = std::make_unique<NcclTransport>(init_over_mpi(comm, device), device);
  return std::make_shared<NcclCommunicator>(std::move(transport), opts);
}

std::vector<std::shared_ptr<Communicator>> make_nccl_local_group(const std::vector<Device>& devices, Options opts) {
  TANDEM_CHECK(!devices.empty(), "make_nccl_local_group: no devices given");
  const int visible = cuda::device_count();
  std::vector<int> ids;
  for (const Device& d : devices) {
    TANDEM_CHECK(d.kind == DeviceKind::CUDA, "make_nccl_local_group: {} is not a CUDA device; make_local_group "
                 "serves host memory", d.str());
    TANDEM_CHECK_KIND(NotSupported, d.index >= 0 && d.index < visible,
                      "make_nccl_local_group: {} does not exist: this process sees {} CUDA device{}", d.str(), visible,
                      visible == 1 ? "" : "s");
    for (int id : ids)
      TANDEM_CHECK(id != d.index, "make_nccl_local_group: {} is listed twice; NCCL needs a device per member", d.str());
    ids.push_back(d.index);
  }
  // One call from this thread initialises the whole clique (member k on devices[k], rank k).
  const size_t n = ids.size();
  std::vector<ncclComm_t> comms(n, nullptr);
  NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(n), ids.data()));
  std::vector<std::unique_ptr<NcclTransport>> transports;
  for (size_t k = 0; k < n; ++k) {
    try {
      transports.push_back(std::make_unique<NcclTransport>(comms[k], ids[k]));  // its constructor owns comms[k]
    } catch (...) {
      for (size_t j = k + 1; j < n; ++j) ncclCommDestroy(comms[j]);
      throw;
    }
  }
  std::vector<std::shared_ptr<Communicator>> group;
  for (auto& t : transports) group.push_back(std::make_shared<NcclCommunicator>(std::move(t), opts));
  return group;
}

}  // namespace tandem::comm
