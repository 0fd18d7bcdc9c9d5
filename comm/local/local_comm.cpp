// The in-process backend: n communicators sharing memory, one per thread. The transport hands a
// sender's buffer to its receiver through a per-pair mailbox; the receiver copies straight out of
// the sender's memory and tells it when done.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "comm/ring_comm.h"

namespace tandem::comm {
namespace {

struct Message {
  const void* src = nullptr;
  size_t bytes = 0;
  bool consumed = false;
};

// State shared by the members of one group.
struct LocalGroup {
  explicit LocalGroup(int n) : n(n), mailbox(static_cast<size_t>(n) * n), started(static_cast<size_t>(n), 0) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<Message*>> mailbox;  // [src * n + dst]: posted, unconsumed sends in order
  std::vector<uint64_t> started;              // the last collective each member started
};

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<LocalGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->n; }

  void send(const void* src, size_t bytes, int peer) override {
    sends_.push_back({src, bytes, false});
    send_peers_.push_back(peer);
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      g_->mailbox[static_cast<size_t>(rank_ * g_->n + peer)].push_back(&sends_.back());
    }
    g_->cv.notify_all();
  }

  void recv(void* dst, size_t bytes, int peer) override { recvs_.push_back({dst, bytes, peer}); }

  void wait(const OpInfo& op) override {
    std::unique_lock<std::mutex> lk(g_->mu);
    // Receives first (they depend only on senders having posted), then our sends being consumed.
    for (const PendingRecv& r : recvs_) {
      auto& box = g_->mailbox[static_cast<size_t>(r.peer * g_->n + rank_)];
      if (!g_->cv.wait_until(lk, op.deadline, [&] { return !box.empty(); })) fail(op, lk, {r.peer});
      Message* msg = box.front();
      TANDEM_CHECK_KIND(Comm, msg->bytes == r.bytes,
                        "rank {}: {} (collective #{}) expected {} bytes from rank {} but it sent {}; the "
                        "ranks called different collectives (set TANDEM_DEBUG_DESYNC=1 to see which)",
                        rank_, op.name, op.seq, r.bytes, r.peer, msg->bytes);
      box.pop_front();
      lk.unlock();
      std::memcpy(r.dst, msg->src, r.bytes);
      lk.lock();
      msg->consumed = true;
      g_->cv.notify_all();
    }
    recvs_.clear();
    for (size_t i = 0; i < sends_.size(); ++i) {
      Message& m = sends_[i];
      if (!g_->cv.wait_until(lk, op.deadline, [&] { return m.consumed; })) fail(op, lk, {send_peers_[i]});
    }
    sends_.clear();
    send_peers_.clear();
  }

  void announce(uint64_t seq) override {
    std::lock_guard<std::mutex> lk(g_->mu);
    g_->started[static_cast<size_t>(rank_)] = seq;
  }
  std::vector<int> lagging_ranks(uint64_t seq) override {
    std::lock_guard<std::mutex> lk(g_->mu);
    std::vector<int> out;
    for (int r = 0; r < g_->n; ++r)
      if (g_->started[static_cast<size_t>(r)] < seq) out.push_back(r);
    return out;
  }

 private:
  struct PendingRecv { void* dst; size_t bytes; int peer; };

  [[noreturn]] void fail(const OpInfo& op, std::unique_lock<std::mutex>& lk, std::vector<int> peers) {
    // Withdraw our unconsumed sends so no peer reads our buffers after we return.
    for (int d = 0; d < g_->n; ++d) g_->mailbox[static_cast<size_t>(rank_ * g_->n + d)].clear();
    recvs_.clear();
    sends_.clear();
    send_peers_.clear();
    lk.unlock();
    deadline_error(op, peers);
  }

  std::shared_ptr<LocalGroup> g_;
  const int rank_;
  std::deque<Message> sends_;  // stable addresses while posted
  std::vector<int> send_peers_;
  std::vector<PendingRecv> recvs_;
};

class LocalCommunicator final : public RingCommunicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> g, int rank, Options opts)
      : RingCommunicator(opts, Device(DeviceKind::CPU, rank), "local") {
    start(std::make_unique<LocalTransport>(std::move(g), rank), /*use_thread=*/true);
  }
  ~LocalCommunicator() override { stop(); }
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_local_group(int n, Options opts) {
  TANDEM_CHECK(n >= 1, "make_local_group: n must be >= 1, got {}", n);
  auto g = std::make_shared<LocalGroup>(n);
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_shared<LocalCommunicator>(g, r, opts));
  return out;
}

}  // namespace tandem::comm
