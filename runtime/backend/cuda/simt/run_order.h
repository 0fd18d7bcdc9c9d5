// SIMT emulator: the order a launch's blocks and a block's threads run in (TANDEM_SIMT_ORDER). Part of
// simt.h.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>

#include "runtime/backend/cuda/simt/cuda_names.h"
#include "runtime/env_settings.h"

namespace tandem::simt {

// The order the blocks of a launch run in, and the threads of a block resume in. A GPU runs blocks
// concurrently in no promised order, and a block's warps likewise, so a kernel whose result depends
// on which block runs first or last (a last-block pass, a value built by atomics in arrival order),
// or on one thread's write reaching another without a barrier, can give other results there than
// here. Running them in other orders shows it: TANDEM_SIMT_ORDER=forward (the default: blocks x
// fastest, then y, z; threads by linear index), reverse, or shuffle (a permutation of its own for
// each launch and each block's each pass, from a fixed seed: every run of a program sees the same).
enum class RunOrder { Forward, Reverse, Shuffle };

namespace detail {
inline RunOrder run_order_from_env() {  // the values' order in runtime/env_settings.cpp
  return static_cast<RunOrder>(tandem::env::choice("TANDEM_SIMT_ORDER"));
}
inline RunOrder& run_order_setting() {
  static RunOrder order = run_order_from_env();
  return order;
}
inline uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// The i-th of n items (blocks, or a block's threads) to run, in the current order. Shuffle maps i to
// (a * i + c) mod n with a coprime to n, a bijection that needs no table whatever the grid's size; a
// and c come from a per-host-thread count of the sequences made.
struct RunSequence {
  RunOrder order;
  unsigned long long n, a = 1, c = 0;
  RunSequence(RunOrder o, unsigned long long n_) : order(o), n(n_) {
    static thread_local unsigned long long made = 0;  // per host thread: the same in every run
    if (order != RunOrder::Shuffle || n < 2) return;
    const uint64_t r = mix64(++made);
    c = mix64(r) % n;
    a = r % n;
    while (std::gcd(a, n) != 1) a = (a + 1) % n;  // ends: 1 is coprime to every n
  }
  unsigned long long operator[](unsigned long long i) const {
    if (order == RunOrder::Reverse) return n - 1 - i;
    if (order == RunOrder::Forward) return i;
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * i + c) % n);
  }
};
}  // namespace detail

// The order blocks and threads run in from now on (tests); returns the one before.
inline RunOrder set_run_order(RunOrder order) {
  const RunOrder before = detail::run_order_setting();
  detail::run_order_setting() = order;
  return before;
}
}  // namespace tandem::simt
