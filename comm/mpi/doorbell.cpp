// Doorbells: a futex eventcount per rank in shared memory.
#include "comm/mpi/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <new>

#include "comm/mpi/mpi_check.h"
#include "comm/mpi/shared_window.h"

namespace tandem::comm {

Doorbells::Doorbells(MPI_Comm comm, int rank, int size, bool oversubscribed)
    : rank_(rank), size_(size), oversubscribed_(oversubscribed) {
  static_assert(alignof(Bell) <= kSharedAlign);
  SharedWindow w = allocate_shared_window(comm, sizeof(Bell));
  win_ = w.win;
  new (w.segments[static_cast<size_t>(rank_)]) Bell();
  for (char* p : w.segments) bells_.push_back(reinterpret_cast<Bell*>(p));
  MPI_CHECK(MPI_Barrier(comm));  // every bell constructed before anyone rings
}

// An eventcount. The ringer bumps `rings` after its change (seq_cst), then makes the system call
// only if the owner is parked. The owner takes its ticket before testing, and the futex sleeps
// only while `rings` still equals the ticket: a change made after the ticket was taken either
// shows in the test or fails the futex's comparison, so no ring is missed.
void Doorbells::ring(int peer) {
  Bell* b = bells_[static_cast<size_t>(peer)];
  b->rings.fetch_add(1, std::memory_order_seq_cst);
  if (b->parked.load(std::memory_order_seq_cst))
    syscall(SYS_futex, &b->rings, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);  // shared, not private
}

void Doorbells::ring_all() {
  for (int r = 0; r < size_; ++r)
    if (r != rank_) ring(r);
}

void Doorbells::set_owner_idle(bool idle) {
  owner_idle_.store(idle, std::memory_order_relaxed);
  if (idle) ring(rank_);
}

Clock::duration Doorbells::spin_budget() const {
  return owner_idle_.load(std::memory_order_relaxed) ? Clock::duration(kSpinIdle) : Clock::duration(kSpin);
}

void Doorbells::cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

uint32_t Doorbells::ticket() const { return bells_[static_cast<size_t>(rank_)]->rings.load(std::memory_order_seq_cst); }

void Doorbells::park(uint32_t ticket, Clock::duration timeout) {
  Bell* b = bells_[static_cast<size_t>(rank_)];
  b->parked.store(1, std::memory_order_seq_cst);
  const int64_t ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count());
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  // EAGAIN (rung since the ticket), EINTR and ETIMEDOUT all return to the caller's test.
  if (b->rings.load(std::memory_order_seq_cst) == ticket)
    syscall(SYS_futex, &b->rings, FUTEX_WAIT, ticket, &ts, nullptr, 0);
  b->parked.store(0, std::memory_order_relaxed);
}

}  // namespace tandem::comm
