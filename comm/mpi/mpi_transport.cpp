// MPI transport: Isend/Irecv polled against the deadline, cancellation on timeout, and the board.
#include "comm/mpi/mpi_transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <numeric>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/shared_window.h"

namespace tandem::comm {

namespace {
constexpr int kTag = 7301;
constexpr size_t kMaxMessage = size_t(1) << 30;  // MPI counts are int: split larger messages

// The rank in `job` of each rank of `part` (a communicator split from it).
std::vector<int> ranks_in(MPI_Comm part, MPI_Comm job) {
  MPI_Group part_group = MPI_GROUP_NULL, job_group = MPI_GROUP_NULL;
  MPI_CHECK(MPI_Comm_group(part, &part_group));
  MPI_CHECK(MPI_Comm_group(job, &job_group));
  int n = 0;
  MPI_CHECK(MPI_Group_size(part_group, &n));
  std::vector<int> mine(static_cast<size_t>(n)), theirs(static_cast<size_t>(n));
  std::iota(mine.begin(), mine.end(), 0);
  MPI_CHECK(MPI_Group_translate_ranks(part_group, n, mine.data(), job_group, theirs.data()));
  MPI_CHECK(MPI_Group_free(&part_group));
  MPI_CHECK(MPI_Group_free(&job_group));
  return theirs;
}
}  // namespace

MpiTransport::MpiTransport(MPI_Comm host, bool use_shm, int node_id, int machine_ranks, MpiTransport* job) {
  MPI_CHECK(MPI_Comm_dup(host, &comm_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int node_size = 0;
  MPI_CHECK(MPI_Comm_size(node, &node_size));
  // Every rank's node, for counting the bytes that leave ours: by default the rank (in comm_) of
  // the node's first rank.
  if (node_id < 0) {
    node_id = rank_;
    MPI_CHECK(MPI_Bcast(&node_id, 1, MPI_INT, 0, node));
  }
  node_of_.resize(static_cast<size_t>(size_));
  MPI_CHECK(MPI_Allgather(&node_id, 1, MPI_INT, node_of_.data(), 1, MPI_INT, comm_));
  if (node_size == size_) {
    // Key 0 keeps the order of comm_, so node ranks equal our ranks.
    SharedWindow w = allocate_shared_window(node, kSharedAlign);  // a cache line per rank
    board_win_ = w.win;
    new (w.segments[static_cast<size_t>(rank_)]) std::atomic<uint64_t>(0);
    MPI_CHECK(MPI_Barrier(node));
    for (char* p : w.segments) board_.push_back(reinterpret_cast<std::atomic<uint64_t>*>(p));
  }
  if (job) {
    report_as(job, ranks_in(comm_, job->comm_));
  } else if (board_.empty() && size_ > 1) {
    // Across nodes no memory is shared by all ranks: missing ranks are found by a roll call at the
    // deadline instead, on a communicator of its own whose errors are returned, not fatal (a peer
    // that died must not turn the deadline's message into Open MPI's abort).
    MPI_CHECK(MPI_Comm_dup(comm_, &roll_call_comm_));
    MPI_CHECK(MPI_Comm_set_errhandler(roll_call_comm_, MPI_ERRORS_RETURN));
  }
  oversubscribed_ = std::max(node_size, machine_ranks) > sysconf(_SC_NPROCESSORS_ONLN);
  if (node_size == size_ && use_shm && size_ > 1) {
    bells_ = std::make_unique<Doorbells>(comm_, rank_, size_, oversubscribed_);
    shm_ = std::make_unique<ShmChannels>(comm_, rank_, size_, *bells_);
    direct_ = std::make_unique<ShmDirect>(comm_, rank_, size_, *bells_);
  }
  MPI_CHECK(MPI_Comm_free(&node));
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || broken_) return;  // requests may still be pending: leave them to MPI_Finalize
  // The board window is not freed: MPI_Win_free is collective and a rank whose peers failed
  // would block in it. MPI_Finalize releases it.
  MPI_Comm_free(&comm_);
  if (roll_call_comm_ != MPI_COMM_NULL) MPI_Comm_free(&roll_call_comm_);
}

void MpiTransport::send(const void* src, size_t bytes, int peer) {
  if (node_of_[static_cast<size_t>(peer)] != node_of_[static_cast<size_t>(rank_)])
    cross_node_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (shm_) return shm_->post_send(src, bytes, peer);
  const char* p = static_cast<const char*>(src);
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += kMaxMessage) {
    int n = static_cast<int>(std::min(kMaxMessage, bytes - off));
    reqs_.emplace_back();
    peers_.push_back(peer);
    MPI_CHECK(MPI_Isend(p + off, n, MPI_BYTE, peer, kTag, comm_, &reqs_.back()));
    if (bytes == 0) break;
  }
}

void MpiTransport::recv_reduce(void* dst, size_t bytes, int peer, DType dtype, ReduceOp op) {
  shm_->post_recv_reduce(dst, bytes, peer, dtype, op);
}

void MpiTransport::recv_uncached(void* dst, size_t bytes, int peer) {
  if (shm_) return shm_->post_recv(dst, bytes, peer, /*uncached=*/true);
  recv(dst, bytes, peer);
}

int64_t MpiTransport::preferred_segment_bytes() const {
  // Shared-memory channels: 256 KiB segments (4 slots) keep both ranks copying through the
  // slots at once, cache-resident; larger segments waited longer per step and went through
  // cross-memory attach (a system call and page pinning per message), which at 4-64 MB on 2 ranks
  // was 1.3-2x slower (comm/README.md, "Performance on AMD EPYC").
  return shm_ ? 256 * 1024 : 1024 * 1024;
}

void MpiTransport::recv(void* dst, size_t bytes, int peer) {
  if (shm_) return shm_->post_recv(dst, bytes, peer);
  char* p = static_cast<char*>(dst);
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += kMaxMessage) {
    int n = static_cast<int>(std::min(kMaxMessage, bytes - off));
    reqs_.emplace_back();
    peers_.push_back(peer);
    MPI_CHECK(MPI_Irecv(p + off, n, MPI_BYTE, peer, kTag, comm_, &reqs_.back()));
    if (bytes == 0) break;
  }
}

template <class Test>
bool MpiTransport::poll(Test&& test, Clock::time_point deadline) {
  if (test()) return true;
  const auto start = Clock::now();
  for (uint64_t i = 1;; ++i) {
    if (test()) return true;
    if (oversubscribed_) sched_yield();  // the peer we wait for may need this core
    if ((i & 15) == 0) {
      auto now = Clock::now();
      if (now > deadline) return false;
      // Back off so that oversubscribed ranks let their peers run: spin ~20 us, then yield the
      // core on every poll, then sleep briefly (a peer that is far behind or descheduled).
      auto waited = now - start;
      if (waited > std::chrono::microseconds(500))
        usleep(20);
      else if (waited > std::chrono::microseconds(20))
        sched_yield();
    }
  }
}

void MpiTransport::wait(const OpInfo& op) {
  if (shm_) {
    bool done = false;
    try {
      done = bells_->wait_until(
          [&] {
            if (shm_->progress(*this)) return true;
            if (direct_ && op.seq == ring_allreduce_seq_) direct_->check_no_direct_peer(op.seq);
            return false;
          },
          op.deadline);
    } catch (const CommError& e) {  // a size mismatch or a vanished peer: say which collective
      broken_ = true;
      shm_->abandon();
      TANDEM_FAIL(Comm, "{} (collective #{}): {}", op.name, op.seq, e.what());
    }
    if (!done) {
      broken_ = true;
      deadline_error(op, shm_->abandon());
    }
    return;
  }
  if (reqs_.empty()) return;
  int n = static_cast<int>(reqs_.size());
  bool done = poll([&] {
    int flag = 0;
    MPI_CHECK(MPI_Testall(n, reqs_.data(), &flag, MPI_STATUSES_IGNORE));
    return flag != 0;
  }, op.deadline);
  if (!done) {
    std::vector<int> waiting;
    for (size_t i = 0; i < reqs_.size(); ++i) {
      if (reqs_[i] == MPI_REQUEST_NULL) continue;
      waiting.push_back(peers_[i]);
      MPI_Cancel(&reqs_[i]);
      MPI_Request_free(&reqs_[i]);
    }
    std::sort(waiting.begin(), waiting.end());
    waiting.erase(std::unique(waiting.begin(), waiting.end()), waiting.end());
    reqs_.clear();
    peers_.clear();
    broken_ = true;
    deadline_error(op, waiting);
  }
  reqs_.clear();
  peers_.clear();
}

ShmDirect::Block MpiTransport::allocate_shared(size_t bytes) {
  return direct_ ? direct_->allocate(bytes) : ShmDirect::Block{};
}

bool MpiTransport::direct_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  if (!direct_) return false;
  std::vector<int> missing;
  ShmDirect::Outcome outcome;
  try {
    outcome = direct_->allreduce(buf, count, dtype, op, info.seq, info.deadline, missing);
  } catch (const CommError&) {
    broken_ = true;
    throw;
  }
  if (outcome == ShmDirect::Outcome::Plain) {
    ring_allreduce_seq_ = info.seq;  // wait() checks that no peer went direct meanwhile
    return false;
  }
  if (outcome == ShmDirect::Outcome::Missed) {
    broken_ = true;
    deadline_error(info, missing);
  }
  return true;
}

void MpiTransport::wait_request(MPI_Request& req, const OpInfo& op) {
  bool done = poll([&] {
    int flag = 0;
    MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }, op.deadline);
  if (!done) {
    broken_ = true;  // a collective request cannot be cancelled; MPI_Finalize or MPI_Abort ends it
    deadline_error(op, {});
  }
}

void MpiTransport::announce(uint64_t seq) {
  if (!board_.empty()) board_[static_cast<size_t>(rank_)]->store(seq, std::memory_order_release);
}

std::vector<int> MpiTransport::lagging_ranks(uint64_t seq) {
  std::vector<int> out;
  for (size_t r = 0; r < board_.size(); ++r)
    if (board_[r]->load(std::memory_order_acquire) < seq) out.push_back(static_cast<int>(r));
  if (roll_call_comm_ == MPI_COMM_NULL || !roll_call_theirs_.empty()) return out;  // one roll call per communicator
  // The roll call: each rank that reaches its deadline in collective #seq tells every other rank so
  // and listens for theirs. The ranks that entered #seq all reach their deadlines within the skew of
  // their entries; a rank that sends nothing within the window (dead, or in another call) or an
  // earlier number never arrived at #seq. Costs nothing before a deadline.
  constexpr int kRollCallTag = 7302;
  constexpr double kWindow_s = 3;
  roll_call_mine_ = seq;
  roll_call_theirs_.assign(static_cast<size_t>(size_), 0);
  std::vector<MPI_Request> recvs(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Irecv(&roll_call_theirs_[static_cast<size_t>(r)], 1, MPI_UINT64_T, r, kRollCallTag, roll_call_comm_,
              &recvs[static_cast<size_t>(r)]);
    MPI_Request send = MPI_REQUEST_NULL;
    if (MPI_Isend(&roll_call_mine_, 1, MPI_UINT64_T, r, kRollCallTag, roll_call_comm_, &send) == MPI_SUCCESS)
      MPI_Request_free(&send);  // completes, or not, without us
  }
  std::vector<bool> heard(static_cast<size_t>(size_), false);
  heard[static_cast<size_t>(rank_)] = true;
  const auto window =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWindow_s));
  poll([&] {
    bool all = true;
    for (int r = 0; r < size_; ++r) {
      auto& req = recvs[static_cast<size_t>(r)];
      if (heard[static_cast<size_t>(r)]) continue;
      int flag = 0;
      if (req != MPI_REQUEST_NULL && MPI_Test(&req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag)
        heard[static_cast<size_t>(r)] = true;
      else
        all = false;
    }
    return all;
  }, window);
  out.clear();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!heard[static_cast<size_t>(r)]) {
      MPI_Request& req = recvs[static_cast<size_t>(r)];
      if (req != MPI_REQUEST_NULL && MPI_Cancel(&req) == MPI_SUCCESS) MPI_Request_free(&req);
    }
    if (!heard[static_cast<size_t>(r)] || roll_call_theirs_[static_cast<size_t>(r)] < seq) out.push_back(r);
  }
  return out;
}

}  // namespace tandem::comm
