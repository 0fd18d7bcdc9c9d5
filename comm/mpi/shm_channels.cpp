// Shared-memory channels: bounded single-producer single-consumer slot queues per pair of ranks.
#include "comm/mpi/shm_channels.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "comm/mpi/doorbell.h"
#include "comm/mpi/mpi_check.h"
#include "comm/mpi/shared_window.h"
#include "comm/transport.h"
#include "runtime/env_settings.h"

namespace tandem::comm {

ShmChannels::ShmChannels(MPI_Comm comm, int rank, int size, Doorbells& bells, size_t slot_bytes, int slots,
                         size_t cma_min_bytes)
    : rank_(rank),
      size_(size),
      bells_(bells),
      slot_bytes_(slot_bytes),
      slots_(std::min(slots, 64)),
      cma_min_bytes_(cma_min_bytes) {
  channel_bytes_ = (sizeof(Header) + slot_bytes_ * slots_ + 4095) / 4096 * 4096;
  // Channels rank -> d live in rank's segment, each on a whole number of pages.
  static_assert(alignof(Header) <= kSharedAlign);
  SharedWindow w = allocate_shared_window(comm, channel_bytes_ * size_);
  win_ = w.win;
  base_ = std::move(w.segments);
  char* mine = base_[static_cast<size_t>(rank_)];
  std::memset(mine, 0, channel_bytes_ * size_);  // fault the pages in now
  for (int d = 0; d < size_; ++d) new (mine + channel_bytes_ * d) Header();
  MPI_CHECK(MPI_Barrier(comm));  // every header constructed before anyone uses it

  // Cross-memory attach: usable when every rank can read a word of every other rank.
  int want = env::flag("TANDEM_COMM_CMA") ? 1 : 0;
  int pid = static_cast<int>(getpid());
  static const uint64_t probe = 0x74616e64656d;  // "tandem"
  uint64_t addr = reinterpret_cast<uint64_t>(&probe);
  pids_.resize(static_cast<size_t>(size_));
  std::vector<uint64_t> addrs(static_cast<size_t>(size_));
  MPI_CHECK(MPI_Allgather(&pid, 1, MPI_INT, pids_.data(), 1, MPI_INT, comm));
  MPI_CHECK(MPI_Allgather(&addr, 1, MPI_UINT64_T, addrs.data(), 1, MPI_UINT64_T, comm));
  int ok = want;
  for (int r = 0; r < size_ && ok; ++r) {
    uint64_t got = 0;
    iovec local{&got, sizeof got}, remote{reinterpret_cast<void*>(addrs[r]), sizeof got};
    ok = process_vm_readv(pids_[r], &local, 1, &remote, 1, 0) == ssize_t(sizeof got) && got == probe;
  }
  int all = 0;
  MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
  cma_ = all == 1;
  if (cma_) landing_.resize(slot_bytes_ / sizeof(uint64_t));
}

void ShmChannels::read_remote(int peer, void* dst, uint64_t remote_addr, size_t bytes) {
  char* d = static_cast<char*>(dst);
  while (bytes) {
    iovec local{d, bytes}, remote{reinterpret_cast<void*>(remote_addr), bytes};
    ssize_t n = process_vm_readv(pids_[static_cast<size_t>(peer)], &local, 1, &remote, 1, 0);
    if (n <= 0)
      TANDEM_FAIL(Comm, "rank {}: process_vm_readv from rank {} (pid {}) failed: {}; the peer died? (set "
                  "TANDEM_COMM_CMA=0 to move data through shared-memory slots instead)",
                  rank_, peer, pids_[static_cast<size_t>(peer)], std::strerror(errno));
    d += n;
    remote_addr += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

// cma: a send publishes its address and completes when the receiver has read it; a receive reads
// the whole message from the sender's memory (fused: in slot-sized pieces, each reduced at once).
bool ShmChannels::advance_cma(Op& o, Transport& reducer) {
  if (o.send) {
    Header* h = channel(rank_, o.peer);
    if (!o.published) {
      uint64_t head = h->head.load(std::memory_order_relaxed);
      if (head - h->tail.load(std::memory_order_acquire) >= uint64_t(slots_)) return false;
      h->addrs[head % slots_] = reinterpret_cast<uint64_t>(o.ptr);
      h->sizes[head % slots_] = o.bytes;
      o.seq = head;
      o.published = true;
      h->head.store(head + 1, std::memory_order_release);
      bells_.ring(o.peer);
    }
    if (h->tail.load(std::memory_order_acquire) > o.seq) o.done = o.bytes;
    return o.done == o.bytes;
  }
  Header* h = channel(o.peer, rank_);
  uint64_t tail = h->tail.load(std::memory_order_relaxed);
  if (tail >= h->head.load(std::memory_order_acquire)) return false;
  TANDEM_CHECK_KIND(Comm, h->sizes[tail % slots_] == o.bytes,
                    "rank {}: expected a {}-byte message from rank {} but it sent {} bytes; the ranks called "
                    "different collectives or counts (set TANDEM_DEBUG_DESYNC=1 to see which)",
                    rank_, o.bytes, o.peer, h->sizes[tail % slots_]);
  const uint64_t addr = h->addrs[tail % slots_];
  if (!o.reduce) {
    read_remote(o.peer, o.ptr, addr, o.bytes);
  } else {
    const size_t esz = dtype_size(o.dtype);
    const size_t piece = slot_bytes_ / esz * esz;
    for (size_t off = 0; off < o.bytes; off += piece) {
      size_t n = std::min(piece, o.bytes - off);
      read_remote(o.peer, landing_.data(), addr + off, n);
      reducer.reduce(o.ptr + off, landing_.data(), static_cast<int64_t>(n / esz), o.dtype, o.op);
    }
  }
  o.done = o.bytes;
  h->tail.store(tail + 1, std::memory_order_release);
  bells_.ring(o.peer);
  return true;
}

ShmChannels::Header* ShmChannels::channel(int src, int dst) const {
  return reinterpret_cast<Header*>(base_[static_cast<size_t>(src)] + channel_bytes_ * dst);
}
char* ShmChannels::slot(Header* h, uint64_t i) const {
  return reinterpret_cast<char*>(h) + sizeof(Header) + slot_bytes_ * (i % slots_);
}

void ShmChannels::post_send(const void* src, size_t bytes, int peer) {
  bool cma = cma_ && bytes >= cma_min_bytes_;
  ops_.push_back({true, const_cast<char*>(static_cast<const char*>(src)), bytes, 0, peer, false, DType::u8,
                  ReduceOp::Sum, cma});
}
void ShmChannels::post_recv(void* dst, size_t bytes, int peer, bool uncached) {
  bool cma = cma_ && bytes >= cma_min_bytes_;
  ops_.push_back({false, static_cast<char*>(dst), bytes, 0, peer, false, DType::u8, ReduceOp::Sum, cma});
  ops_.back().uncached = uncached;
}
void ShmChannels::post_recv_reduce(void* dst, size_t bytes, int peer, DType dtype, ReduceOp op) {
  bool cma = cma_ && bytes >= cma_min_bytes_;
  ops_.push_back({false, static_cast<char*>(dst), bytes, 0, peer, true, dtype, op, cma});
}

// Moves as many pieces of o as the channel allows; true when o is finished.
bool ShmChannels::advance(Op& o, Transport& reducer) {
  if (o.cma) return advance_cma(o, reducer);
  const size_t before = o.done;
  if (o.send) {
    Header* h = channel(rank_, o.peer);
    uint64_t head = h->head.load(std::memory_order_relaxed);
    uint64_t tail = h->tail.load(std::memory_order_acquire);
    while (o.done < o.bytes && head - tail < uint64_t(slots_)) {
      size_t n = std::min(slot_bytes_, o.bytes - o.done);
      std::memcpy(slot(h, head), o.ptr + o.done, n);
      h->sizes[head % slots_] = n;
      h->head.store(++head, std::memory_order_release);
      o.done += n;
      if (head - tail >= uint64_t(slots_)) tail = h->tail.load(std::memory_order_acquire);
    }
  } else {
    Header* h = channel(o.peer, rank_);
    uint64_t tail = h->tail.load(std::memory_order_relaxed);
    uint64_t head = h->head.load(std::memory_order_acquire);
    while (o.done < o.bytes && tail < head) {
      size_t n = std::min(slot_bytes_, o.bytes - o.done);
      TANDEM_CHECK_KIND(Comm, h->sizes[tail % slots_] == n,
                        "rank {}: expected a {}-byte piece from rank {} but it sent {} bytes; the ranks called "
                        "different collectives or counts (set TANDEM_DEBUG_DESYNC=1 to see which)",
                        rank_, n, o.peer, h->sizes[tail % slots_]);
      const char* src = slot(h, tail);
      if (o.reduce)  // straight from the neighbour's memory into ours
        reducer.reduce(o.ptr + o.done, src, static_cast<int64_t>(n / dtype_size(o.dtype)), o.dtype, o.op);
      else if (o.uncached)
        copy_uncached(o.ptr + o.done, src, n);
      else
        std::memcpy(o.ptr + o.done, src, n);
      h->tail.store(++tail, std::memory_order_release);
      o.done += n;
      if (tail == head) head = h->head.load(std::memory_order_acquire);
    }
  }
  if (o.done != before) bells_.ring(o.peer);  // new pieces to read, or free slots to fill
  return o.done == o.bytes;
}

bool ShmChannels::progress(Transport& reducer) {
  bool all = true;
  // Operations on one channel complete in posting order: skip later ones until earlier ones finish.
  uint64_t blocked_send = 0, blocked_recv = 0;  // bitmask of peers (ranks < 64) with an unfinished op
  std::vector<int> blocked;
  for (Op& o : ops_) {
    if (o.done == o.bytes) continue;
    bool is_blocked = false;
    if (o.peer < 64)
      is_blocked = ((o.send ? blocked_send : blocked_recv) >> o.peer) & 1u;
    else
      is_blocked = std::find(blocked.begin(), blocked.end(), o.send ? o.peer : -1 - o.peer) != blocked.end();
    if (!is_blocked && advance(o, reducer)) continue;
    all = false;
    if (o.peer < 64)
      (o.send ? blocked_send : blocked_recv) |= uint64_t(1) << o.peer;
    else
      blocked.push_back(o.send ? o.peer : -1 - o.peer);
  }
  if (all) ops_.clear();
  return all;
}

std::vector<int> ShmChannels::abandon() {
  std::vector<int> peers;
  for (const Op& o : ops_)
    if (o.done < o.bytes) peers.push_back(o.peer);
  ops_.clear();
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

}  // namespace tandem::comm
