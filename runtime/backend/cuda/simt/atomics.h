// SIMT emulator: atomics. Part of simt.h.
#pragma once

namespace tandem::simt {

// ---- atomics: fibers never preempt each other, so read-modify-write is atomic by construction;
// the __atomic builtins keep it so if two OS threads ever share memory. ----
template <class T>
T atomic_rmw(T* p, T v, int op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- and 8-byte types");
  T old = *p, want;
  do {
    switch (op) {
      case 0: want = old + v; break;
      case 1: want = old < v ? v : old; break;
      case 2: want = v < old ? v : old; break;
      default: want = v; break;
    }
  } while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return old;
}

}  // namespace tandem::simt

template <class T>
T atomicAdd(T* p, T v) { return ::tandem::simt::atomic_rmw(p, v, 0); }
template <class T>
T atomicMax(T* p, T v) { return ::tandem::simt::atomic_rmw(p, v, 1); }
template <class T>
T atomicMin(T* p, T v) { return ::tandem::simt::atomic_rmw(p, v, 2); }
template <class T>
T atomicExch(T* p, T v) { return ::tandem::simt::atomic_rmw(p, v, 3); }
template <class T>
T atomicCAS(T* p, T compare, T v) {
  __atomic_compare_exchange(p, &compare, &v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value either way
}
