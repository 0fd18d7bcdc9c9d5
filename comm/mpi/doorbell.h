// Doorbells: how the ranks of one node wait for each other without spinning. Each rank has a
// futex word in an MPI_Win_allocate_shared window; a rank that changed something a peer may be
// waiting for (a channel slot, an arrival, the last piece of a reduction) rings that peer's bell.
// A waiting rank sleeps in the kernel until then: waiting costs no CPU, which matters when ranks
// share cores with their own compute threads, and the sleeper wakes as soon as there is
// something to do (spinning or sleeping in fixed steps would take the core, or wake late).
#pragma once
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/transport.h"

namespace tandem::comm {

class Doorbells {
 public:
  // Collective over comm, whose ranks must all share one node. oversubscribed: more ranks than
  // cores on the node (sleep at once instead of spinning first).
  Doorbells(MPI_Comm comm, int rank, int size, bool oversubscribed);
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;

  void ring(int peer);
  void ring_all();  // every rank but this one

  // Calls test() until it returns true (then true) or the deadline passes (then false): spins
  // for a few microseconds (up to kSpinIdle while the owner is idle), then sleeps on this rank's
  // bell between tries, spinning again after each wake-up. test() must be true once the peers'
  // changes that it waits for are visible, and every such change must ring us.
  template <class Test>
  bool wait_until(Test&& test, Clock::time_point deadline) {
    auto spin_start = Clock::now();
    for (uint64_t i = 0;; ++i) {
      const uint32_t t = ticket();
      if (test()) return true;
      if (i < 64 && !oversubscribed_) continue;
      const auto now = Clock::now();
      if (now > deadline) return false;
      if (!oversubscribed_ && now - spin_start < spin_budget()) {
        cpu_relax();
        continue;
      }
      park(t, std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100)));
      spin_start = Clock::now();
    }
  }

  // The owner (the thread that issued the collectives this rank waits in) is blocked until they
  // complete, or no longer is. While it is, its core has nothing else to run: a wait spins for up
  // to kSpinIdle instead of 5 us, since a sleeping waiter on an idle virtual CPU takes tens of
  // microseconds to wake, and that lands on the critical path of the step. Going idle rings our
  // own bell, so that a wait already asleep wakes up and spins.
  void set_owner_idle(bool idle);

 private:
  struct Bell {
    alignas(64) std::atomic<uint32_t> rings;   // bumped by peers (the futex word)
    alignas(64) std::atomic<uint32_t> parked;  // the owner is (about to be) asleep on rings
  };
  static constexpr auto kSpin = std::chrono::microseconds(5);
  static constexpr auto kSpinIdle = std::chrono::microseconds(1000);
  Clock::duration spin_budget() const;
  static void cpu_relax();
  uint32_t ticket() const;
  void park(uint32_t ticket, Clock::duration timeout);

  int rank_, size_;
  bool oversubscribed_;
  std::atomic<bool> owner_idle_{false};
  MPI_Win win_ = MPI_WIN_NULL;  // left to MPI_Finalize, like the channels' window
  std::vector<Bell*> bells_;
};

}  // namespace tandem::comm
