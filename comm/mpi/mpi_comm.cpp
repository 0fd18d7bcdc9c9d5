// The MPI backend: bootstrap (MPI_Init_thread only when MPI is not yet initialised, MPI_Finalize
// at exit only then), the communicator over MpiTransport, and the native MPI_I* collectives.
#include "comm/mpi/mpi_comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/hierarchy.h"
#include "comm/launcher_env.h"
#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_transport.h"
#include "comm/ring_comm.h"
#include "runtime/env_settings.h"
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

// The nodes as the hierarchy sees them (collective over host): MPI_Comm_split_type's, or with
// TANDEM_TEST_RANKS_PER_NODE=L runs of L consecutive ranks (one host simulating several nodes).
// Nodes are numbered by their first rank.
struct NodeLayout {
  MPI_Comm node = MPI_COMM_NULL;  // this rank's node (the caller frees it)
  int index = 0;                  // this rank's node's number
  int nodes = 1;
  int ranks_per_node = 1;         // 0 where nodes have different numbers of ranks
  std::vector<int> sizes;         // ranks on each node
  int machine_ranks = 1;          // ranks on this machine's CPUs (the same kernel boot id)
};

// How many of host's ranks run on this machine's CPUs: those whose kernel has our boot id.
// Network namespaces or TANDEM_TEST_RANKS_PER_NODE make several "nodes" of one machine, whose
// ranks share its cores all the same (collective over host).
int ranks_on_this_machine(MPI_Comm host) {
  char mine[64] = {};
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(mine, sizeof mine, f)) mine[0] = '\0';
    std::fclose(f);
  }
  int size = 1;
  MPI_CHECK(MPI_Comm_size(host, &size));
  std::vector<char> all(sizeof mine * static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, host));
  if (mine[0] == '\0') return 1;  // unknown: the node's own count decides
  int n = 0;
  for (int r = 0; r < size; ++r) n += std::memcmp(all.data() + sizeof mine * static_cast<size_t>(r), mine, sizeof mine) == 0;
  return n;
}

NodeLayout node_layout(MPI_Comm host) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(host, &rank));
  MPI_CHECK(MPI_Comm_size(host, &size));
  NodeLayout l;
  if (const std::optional<double> per = env::number("TANDEM_TEST_RANKS_PER_NODE"))
    MPI_CHECK(MPI_Comm_split(host, rank / std::max(1, static_cast<int>(*per)), rank, &l.node));
  else
    MPI_CHECK(MPI_Comm_split_type(host, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &l.node));
  int first = rank;  // the node's first rank names it
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, l.node));
  std::vector<int> firsts(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, host));
  std::vector<int> ids = firsts;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  l.nodes = static_cast<int>(ids.size());
  l.index = static_cast<int>(std::lower_bound(ids.begin(), ids.end(), first) - ids.begin());
  for (int id : ids) l.sizes.push_back(static_cast<int>(std::count(firsts.begin(), firsts.end(), id)));
  const bool even = std::all_of(l.sizes.begin(), l.sizes.end(), [&](int n) { return n == l.sizes[0]; });
  l.ranks_per_node = even ? l.sizes[0] : 0;
  l.machine_ranks = ranks_on_this_machine(host);
  return l;
}

class MpiCommunicator final : public RingCommunicator {
 public:
  MpiCommunicator(MPI_Comm host, Options opts) : RingCommunicator(opts, kCPU, "mpi") {
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&provided));
    NodeLayout layout = node_layout(host);
    nodes_ = layout.nodes;
    ranks_per_node_ = layout.ranks_per_node;
    const Options::Algo algo = options().algo;
    // Auto: the hierarchy where it saves cross-node traffic (several nodes, several ranks on each)
    // and can run (as many ranks on every node: the rails then pair up).
    bool hierarchical = algo == Options::Algo::Auto && nodes_ >= 2 && ranks_per_node_ >= 2;
    if (algo == Options::Algo::Hierarchical) {
      if (ranks_per_node_ == 0) MPI_CHECK(MPI_Comm_free(&layout.node));
      TANDEM_CHECK(ranks_per_node_ > 0,
                   "TANDEM_COMM_ALGO=hierarchical (Options::Algo::Hierarchical) needs the same number of ranks on "
                   "every node, but the job's {} nodes have {} ranks; launch as many ranks on each node, or use the "
                   "flat ring (ring or auto)", nodes_, fmt::join(layout.sizes, ", "));
      hierarchical = true;
    }
    auto t = std::make_unique<MpiTransport>(host, options().shared_memory, layout.index, layout.machine_ranks);
    mpi_ = t.get();
    if (hierarchical) {
      // The node's ranks through shared memory; the rail (this local rank on every node, in node
      // order) by MPI point-to-point, as ranks on different nodes talk.
      int local = 0;
      MPI_CHECK(MPI_Comm_rank(layout.node, &local));
      MPI_Comm rail = MPI_COMM_NULL;
      MPI_CHECK(MPI_Comm_split(host, local, layout.index, &rail));
      node_t_ = std::make_unique<MpiTransport>(layout.node, *t, options().shared_memory, layout.index,
                                               layout.machine_ranks);
      rail_t_ = std::make_unique<MpiTransport>(rail, *t, /*use_shm=*/false, layout.index, layout.machine_ranks);
      MPI_CHECK(MPI_Comm_free(&rail));
      hierarchy_ = std::make_unique<Hierarchy>(*node_t_, *rail_t_, options().segment_bytes);
    }
    MPI_CHECK(MPI_Comm_free(&layout.node));
    // A progress thread needs MPI_THREAD_MULTIPLE; otherwise collectives run inside each call.
    start(std::move(t), provided == MPI_THREAD_MULTIPLE);
  }
  ~MpiCommunicator() override {
    if (broken()) {
      mpi_->mark_broken();
      if (node_t_) node_t_->mark_broken(), rail_t_->mark_broken();
    }
    stop();
    hierarchy_.reset();  // its scratch belongs to node_t_
  }

  MpiTraffic traffic() const {
    MpiTraffic t;
    t.allreduce = options().algo == Options::Algo::Native ? "native" : hierarchy_ ? "hierarchical" : "ring";
    t.nodes = nodes_;
    t.ranks_per_node = ranks_per_node_;
    t.cross_node_bytes = mpi_->cross_node_bytes();
    if (node_t_) t.cross_node_bytes += node_t_->cross_node_bytes() + rail_t_->cross_node_bytes();
    return t;
  }

  Tensor make_buffer(int64_t numel, DType dtype) override {
    TANDEM_CHECK(numel >= 0, "make_buffer: numel must be >= 0, got {}", numel);
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    ShmDirect::Block block;
    // Under the hierarchy every all-reduce takes it, so its buffers need no shared window.
    if (bytes > 0 && !hierarchy_ && mpi_->uses_shared_memory())
      run_in_order([&] { block = mpi_->allocate_shared(bytes); });
    if (!block.data) return Communicator::make_buffer(numel, dtype);
    // The window outlives the tensor (until MPI_Finalize); the token frees the buffer for reuse.
    return Tensor::from_blob(block.data, {numel}, dtype, kCPU, std::move(block.token));
  }

 protected:
  bool direct_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) override {
    return mpi_->direct_allreduce(buf, count, dtype, op, info);
  }
  bool hierarchical_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) override {
    if (!hierarchy_) return false;
    hierarchy_->allreduce(buf, count, dtype, op, info);
    return true;
  }
  void caller_waiting(bool waiting) override {
    RingCommunicator::caller_waiting(waiting);
    if (node_t_) node_t_->set_caller_waiting(waiting);
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
  int nodes_ = 1, ranks_per_node_ = 1;
  // The hierarchical all-reduce, where chosen: its transports inside the node and along the rail.
  std::unique_ptr<MpiTransport> node_t_, rail_t_;
  std::unique_ptr<Hierarchy> hierarchy_;
};

}  // namespace

MpiTraffic mpi_traffic(const Communicator& c) {
  const auto* m = dynamic_cast<const MpiCommunicator*>(&c);
  TANDEM_CHECK(m, "mpi_traffic: the {} communicator is not an MPI communicator (make_mpi_communicator)",
               c.backend_name());
  return m->traffic();
}

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
