// The direct all-reduce over shared buffers: arrivals, pieces taken from a shared counter, the
// ring's summation order per element.
#include "comm/mpi/shm_direct.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/shared_window.h"

namespace tandem::comm {

namespace {
constexpr int64_t kPieceBytes = 32 * 1024;  // the unit of work sharing
constexpr int64_t kBlockBytes = 8 * 1024;   // a piece is summed in blocks that stay in L1

bool summable(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::i32 || d == DType::i64; }
}  // namespace

ShmDirect::ShmDirect(MPI_Comm comm, int rank, int size, Doorbells& bells)
    : comm_(comm), rank_(rank), size_(size), bells_(bells) {
  static_assert(alignof(Arrival) <= kSharedAlign && alignof(Counters) <= kSharedAlign);
  static_assert(sizeof(Arrival) % alignof(Counters) == 0, "Counters follow Arrival in rank 0's segment");
  const size_t bytes = rank_ == 0 ? sizeof(Arrival) + sizeof(Counters) : sizeof(Arrival);
  SharedWindow w = allocate_shared_window(comm_, bytes);
  control_win_ = w.win;
  char* mine = w.segments[static_cast<size_t>(rank_)];
  new (mine) Arrival();
  if (rank_ == 0) new (mine + sizeof(Arrival)) Counters();
  for (char* p : w.segments) arrivals_.push_back(reinterpret_cast<Arrival*>(p));
  counters_ = reinterpret_cast<Counters*>(w.segments[0] + sizeof(Arrival));
  MPI_CHECK(MPI_Barrier(comm_));  // constructed everywhere before first use
}

ShmDirect::Block ShmDirect::allocate(size_t bytes) {
  // Every rank must ask for the same size: all of them fail alike when one does not.
  std::vector<uint64_t> sizes(static_cast<size_t>(size_));
  const uint64_t want = bytes;
  MPI_CHECK(MPI_Allgather(&want, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_));
  for (int r = 0; r < size_; ++r)
    TANDEM_CHECK_KIND(Comm, sizes[static_cast<size_t>(r)] == want,
                      "make_buffer: rank {} asked for {} bytes but rank {} for {}; make_buffer is collective and "
                      "every rank must ask for the same size",
                      rank_, bytes, r, sizes[static_cast<size_t>(r)]);
  int64_t index = reusable(bytes);
  if (index < 0) {
    MPI_Info info;
    MPI_CHECK(MPI_Info_create(&info));
    // Each rank's segment on pages of its own (first touched, hence placed, by its owner).
    MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    SharedWindow w = allocate_shared_window(comm_, bytes, info);
    MPI_CHECK(MPI_Info_free(&info));
    Buffer b{w.win, bytes, std::move(w.segments), std::make_shared<std::atomic<bool>>(false)};
    index = static_cast<int64_t>(buffers_.size());
    buffers_.push_back(std::move(b));
  }
  Buffer& b = buffers_[static_cast<size_t>(index)];
  b.taken->store(true, std::memory_order_relaxed);
  char* mine = b.base[static_cast<size_t>(rank_)];
  std::memset(mine, 0, bytes);
  // The token must not be null (a null owner counts as none): it points at the flag it clears.
  std::shared_ptr<std::atomic<bool>> taken = b.taken;
  auto release = [taken](void*) { taken->store(false, std::memory_order_release); };
  return {mine, std::shared_ptr<void>(taken.get(), release)};
}

int64_t ShmDirect::reusable(size_t bytes) const {
  const size_t n = buffers_.size();
  if (n == 0) return -1;
  std::vector<uint8_t> fits(n), all(n * static_cast<size_t>(size_));
  for (size_t i = 0; i < n; ++i)
    fits[i] = buffers_[i].bytes >= bytes && !buffers_[i].taken->load(std::memory_order_acquire);
  MPI_CHECK(MPI_Allgather(fits.data(), static_cast<int>(n), MPI_UINT8_T, all.data(), static_cast<int>(n), MPI_UINT8_T,
                          comm_));
  int64_t best = -1;
  for (size_t i = 0; i < n; ++i) {
    bool everywhere = true;
    for (int r = 0; r < size_; ++r) everywhere = everywhere && all[static_cast<size_t>(r) * n + i];
    if (everywhere && (best < 0 || buffers_[i].bytes < buffers_[static_cast<size_t>(best)].bytes))
      best = static_cast<int64_t>(i);
  }
  return best;
}

ShmDirect::Range ShmDirect::locate(const void* p, size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const char* mine = buffers_[i].base[static_cast<size_t>(rank_)];
    if (c >= mine && c + bytes <= mine + buffers_[i].bytes) return {static_cast<int64_t>(i), c - mine};
  }
  return {};
}

ShmDirect::Outcome ShmDirect::allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, uint64_t seq,
                                        Clock::time_point deadline, std::vector<int>& missing) {
  const size_t esz = dtype_size(dtype);
  const auto [index, offset] = locate(buf, static_cast<size_t>(count) * esz);
  if (index < 0 || !summable(dtype)) {
    // No ring of the doorbell: that would cost the ring's peers a wake-up on every all-reduce. A
    // peer waiting here for our arrival sees the plain one within its longest sleep (100 ms).
    publish(seq, {kPlain, 0, 0, 0, 0});
    return Outcome::Plain;
  }

  // Arrive: say what we reduce, and wake the peers.
  const Fields mine{index, offset, count, static_cast<int32_t>(dtype), static_cast<int32_t>(op)};
  publish(seq, mine);
  bells_.ring_all();
  auto all_arrived = [&] {
    for (int r = 0; r < size_; ++r)
      if (arrival(r)->seq.load(std::memory_order_acquire) < seq) return false;
    return true;
  };
  if (!bells_.wait_until(all_arrived, deadline)) {
    for (int r = 0; r < size_; ++r)
      if (arrival(r)->seq.load(std::memory_order_acquire) < seq) missing.push_back(r);
    return Outcome::Missed;
  }
  // Every rank must reduce the same range. A peer already past this collective (it finished the
  // pieces, after reading our arrival and checking it against its own) is not checked again.
  for (int r = 0; r < size_; ++r) {
    Fields f;
    if (!arrival_for(r, seq, f)) continue;
    if (f.buffer == kPlain)
      TANDEM_FAIL(Comm,
                  "rank {}: allreduce (collective #{}) over make_buffer memory, but rank {} passes memory that is not "
                  "from make_buffer (or a 16-bit type); every rank must pass its own make_buffer buffer or none does",
                  rank_, seq, r);
    if (!(f == mine))
      TANDEM_FAIL(Comm,
                  "rank {}: allreduce (collective #{}) over make_buffer memory: rank {} reduces {} elements at byte "
                  "{} of shared buffer #{}, this rank {} elements at byte {} of buffer #{} (or another dtype or "
                  "op); every rank must reduce the same range of the same buffer",
                  rank_, seq, r, f.count, f.offset, f.buffer, count, offset, index);
  }

  std::vector<char*> x;  // every rank's range, through our mapping of its segment
  for (char* base : buffers_[static_cast<size_t>(index)].base) x.push_back(base + offset);
  const int64_t piece_elems = std::max<int64_t>(1, kPieceBytes / static_cast<int64_t>(esz));
  const int64_t max_chunk = (count + size_ - 1) / size_;
  const int64_t per_chunk = std::max<int64_t>(1, (max_chunk + piece_elems - 1) / piece_elems);
  const uint64_t first = first_piece_, end = first + static_cast<uint64_t>(per_chunk * size_);
  first_piece_ = end;
  // Take pieces until none is left; whoever finishes the last one wakes the others.
  uint64_t t = counters_->next.load(std::memory_order_relaxed);
  while (t < end) {
    if (!counters_->next.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    reduce_piece(x, count, dtype, op, piece_elems, per_chunk, t - first);
    if (counters_->done.fetch_add(1, std::memory_order_acq_rel) + 1 == end) bells_.ring_all();
    t = counters_->next.load(std::memory_order_relaxed);
  }
  const bool done =
      bells_.wait_until([&] { return counters_->done.load(std::memory_order_acquire) >= end; }, deadline);
  return done ? Outcome::Done : Outcome::Missed;
}

// A seqlock on `version` (odd while the fields change). A peer may still be checking our previous
// arrival (we can finish all of a collective's pieces and move on while it is preempted): it must
// never read the next arrival's fields with the old seq, which it would take for a mismatch. seq
// itself only grows (all_arrived reads it alone).
void ShmDirect::publish(uint64_t seq, const Fields& f) {
  Arrival* me = arrival(rank_);
  const uint64_t v = me->version.load(std::memory_order_relaxed);
  me->version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the odd version is seen before any new field
  me->buffer.store(f.buffer, std::memory_order_relaxed);
  me->offset.store(f.offset, std::memory_order_relaxed);
  me->count.store(f.count, std::memory_order_relaxed);
  me->dtype.store(f.dtype, std::memory_order_relaxed);
  me->op.store(f.op, std::memory_order_relaxed);
  me->seq.store(seq, std::memory_order_release);
  me->version.store(v + 2, std::memory_order_release);
}

bool ShmDirect::arrival_for(int r, uint64_t seq, Fields& f) const {
  const Arrival* a = arrival(r);
  for (;;) {
    const uint64_t v = a->version.load(std::memory_order_acquire);
    if (v & 1) {  // a publish in progress: a few stores, unless the writer was preempted
      sched_yield();
      continue;
    }
    if (a->seq.load(std::memory_order_relaxed) != seq) return false;
    f = {a->buffer.load(std::memory_order_relaxed), a->offset.load(std::memory_order_relaxed),
         a->count.load(std::memory_order_relaxed), a->dtype.load(std::memory_order_relaxed),
         a->op.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (a->version.load(std::memory_order_relaxed) == v) return true;
  }
}

void ShmDirect::check_no_direct_peer(uint64_t seq) const {
  for (int r = 0; r < size_; ++r) {
    Fields f;
    if (r != rank_ && arrival_for(r, seq, f) && f.buffer != kPlain)
      TANDEM_FAIL(Comm,
                  "rank {} reduces make_buffer memory in this allreduce, but this rank ({}) passes memory that is not "
                  "from make_buffer (or a 16-bit type); every rank must pass its own make_buffer buffer or none does",
                  r, rank_);
  }
}

void ShmDirect::reduce_piece(const std::vector<char*>& x, int64_t count, DType dtype, ReduceOp op, int64_t piece_elems,
                             int64_t per_chunk, uint64_t piece) {
  const int n = size_;
  const int c = static_cast<int>(piece / static_cast<uint64_t>(per_chunk));
  const int64_t j = static_cast<int64_t>(piece % static_cast<uint64_t>(per_chunk));
  const int64_t lo = count * c / n + j * piece_elems;
  const int64_t hi = std::min(count * (c + 1) / n, lo + piece_elems);
  const size_t esz = dtype_size(dtype);
  const int64_t block = kBlockBytes / static_cast<int64_t>(esz);
  alignas(64) char acc[kBlockBytes];
  for (int64_t b = lo; b < hi; b += block) {
    const int64_t len = std::min(block, hi - b);
    const size_t off = static_cast<size_t>(b) * esz, bytes = static_cast<size_t>(len) * esz;
    // The ring's order: chunk c starts as rank c's values; rank c+k adds its own to the partial.
    std::memcpy(acc, x[static_cast<size_t>(c)] + off, bytes);
    for (int k = 1; k < n; ++k) reduce_elements(acc, x[static_cast<size_t>((c + k) % n)] + off, acc, len, dtype, op);
    if (op == ReduceOp::Avg) divide_elements(acc, len, dtype, n);
    for (int r = 0; r < n; ++r) std::memcpy(x[static_cast<size_t>(r)] + off, acc, bytes);
  }
}

}  // namespace tandem::comm
