// The MPI backend: bootstrap (MPI_Init_thread only when MPI is not yet initialised, MPI_Finalize
// at exit only then), the communicator over MpiTransport, and the native MPI_I* collectives.
#include "comm/mpi/mpi_comm.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/launcher_env.h"
#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_transport.h"
#include "comm/ring_comm.h"
#include "runtime/threads.h"

namespace tandem::comm {
namespace {

void finalize_if_ours() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: TANDEM_FAIL(Internal, "no MPI datatype for {}", dtype_name(t));
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

class MpiCommunicator final : public RingCommunicator {
 public:
  MpiCommunicator(MPI_Comm host, Options opts) : RingCommunicator(opts, kCPU, "mpi") {
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&provided));
    auto t = std::make_unique<MpiTransport>(host, options().shared_memory);
    mpi_ = t.get();
    // A progress thread needs MPI_THREAD_MULTIPLE; otherwise collectives run inside each call.
    start(std::move(t), provided == MPI_THREAD_MULTIPLE);
  }
  ~MpiCommunicator() override {
    if (broken()) mpi_->mark_broken();
    stop();
  }

  Tensor make_buffer(int64_t numel, DType dtype) override {
    TANDEM_CHECK(numel >= 0, "make_buffer: numel must be >= 0, got {}", numel);
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    ShmDirect::Block block;
    if (bytes > 0 && mpi_->uses_shared_memory()) run_in_order([&] { block = mpi_->allocate_shared(bytes); });
    if (!block.data) return Communicator::make_buffer(numel, dtype);
    // The window outlives the tensor (until MPI_Finalize); the token frees the buffer for reuse.
    return Tensor::from_blob(block.data, {numel}, dtype, kCPU, std::move(block.token));
  }

 protected:
  bool direct_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) override {
    return mpi_->direct_allreduce(buf, count, dtype, op, info);
  }
  bool native_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) override {
    if (count > INT_MAX) return false;
    void* data = buf;
    DType dt = dtype;
    if (is_low_precision(dtype)) {  // MPI has no f16/bf16: sum in f32
      wide_.resize(static_cast<size_t>(count));
      convert_host(buf, dtype, wide_.data(), DType::f32, count);
      data = wide_.data();
      dt = DType::f32;
    }
    if (count > 0) {
      MPI_Request req;
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dt), mpi_op(op),
                               mpi_->comm(), &req));
      mpi_->wait_request(req, info);
      if (op == ReduceOp::Avg) mpi_->divide(data, count, dt, size());
    }
    if (data != buf) convert_host(wide_.data(), DType::f32, buf, dtype, count);
    return true;
  }

  bool native_reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                             const OpInfo& info) override {
    const int64_t total = recv_count * size();
    if (total > INT_MAX) return false;
    const void* in = send;
    void* out = recv;
    DType dt = dtype;
    if (is_low_precision(dtype)) {
      wide_.resize(static_cast<size_t>(total + recv_count));
      convert_host(send, dtype, wide_.data(), DType::f32, total);
      in = wide_.data();
      out = wide_.data() + total;
      dt = DType::f32;
    }
    if (recv_count > 0) {
      MPI_Request req;
      MPI_CHECK(MPI_Ireduce_scatter_block(in, out, static_cast<int>(recv_count), mpi_type(dt), mpi_op(op),
                                          mpi_->comm(), &req));
      mpi_->wait_request(req, info);
      if (op == ReduceOp::Avg) mpi_->divide(out, recv_count, dt, size());
    }
    if (out != recv) convert_host(out, DType::f32, recv, dtype, recv_count);
    return true;
  }

  bool native_allgather(const void* send, void* recv, int64_t send_count, DType dtype,
                        const OpInfo& info) override {
    const int64_t bytes = send_count * static_cast<int64_t>(dtype_size(dtype));
    if (bytes * size() > INT_MAX) return false;
    if (bytes == 0) return true;
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                             mpi_->comm(), &req));
    mpi_->wait_request(req, info);
    return true;
  }

  bool native_broadcast(void* buf, int64_t count, DType dtype, int root, const OpInfo& info) override {
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    if (bytes > INT_MAX) return false;
    if (bytes == 0) return true;
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(buf, static_cast<int>(bytes), MPI_BYTE, root, mpi_->comm(), &req));
    mpi_->wait_request(req, info);
    return true;
  }

  bool native_barrier(const OpInfo& info) override {
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(mpi_->comm(), &req));
    mpi_->wait_request(req, info);
    return true;
  }

 private:
  MpiTransport* mpi_ = nullptr;  // owned by the base
  std::vector<float> wide_;      // f32 staging of f16/bf16 for the native path
};

}  // namespace

void ensure_mpi_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialised = 0;
    MPI_CHECK(MPI_Initialized(&initialised));
    if (initialised) return;
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    std::atexit(finalize_if_ours);
  });
}

namespace {
// Ranks that share a node share its CPUs unless the program or OMP_NUM_THREADS chose (runtime/threads.h);
// rank 0 says so, once per process, where that changed the count. Collective over comm.
void share_node_cpus_among(MPI_Comm comm) {
  const ThreadChoice c = share_node_cpus(local_size(comm));
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  static std::atomic<bool> said{false};
  if (c.changed && rank == 0 && !said.exchange(true))
    std::fprintf(stderr, "tandem: %d CPU thread%s per rank (%s); OMP_NUM_THREADS or tandem::set_num_threads "
                 "chooses another count\n", c.count, c.count > 1 ? "s" : "", c.reason.c_str());
}
}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, Options opts) {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  TANDEM_CHECK(initialised, "make_mpi_communicator(MPI_Comm): MPI is not initialised; call MPI_Init_thread "
               "first, or use make_mpi_communicator() which initialises it");
  TANDEM_CHECK(comm != MPI_COMM_NULL, "make_mpi_communicator: comm is MPI_COMM_NULL (a rank outside the split?)");
  share_node_cpus_among(comm);
  return std::make_shared<MpiCommunicator>(comm, opts);
}

std::shared_ptr<Communicator> make_mpi_communicator(Options opts) {
  ensure_mpi_initialised();
  return make_mpi_communicator(MPI_COMM_WORLD, opts);
}

namespace {
MPI_Comm node_comm(MPI_Comm comm) {
  ensure_mpi_initialised();
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  return node;
}
}  // namespace

int local_rank(MPI_Comm comm) {
  MPI_Comm node = node_comm(comm);
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(node, &r));
  MPI_CHECK(MPI_Comm_free(&node));
  return r;
}

int local_size(MPI_Comm comm) {
  MPI_Comm node = node_comm(comm);
  int n = 0;
  MPI_CHECK(MPI_Comm_size(node, &n));
  MPI_CHECK(MPI_Comm_free(&node));
  return n;
}

void abort_job(const std::string& why, int code) {
  std::fprintf(stderr, "tandem: aborting the job: %s\n", why.c_str());
  std::fflush(stderr);
  // MPICH's Hydra kills every rank at the first MPI_Abort and drops what their stderr pipes still
  // hold: the line above was lost in about half the runs of tests/faults/nonfinite.sh under
  // scripts/mpich-check. A moment for its proxy to forward it first (a job that aborts can wait).
  if (launcher_env().launcher == "pmi") std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int initialised = 0, finalized = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  if (initialised && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace tandem::comm
