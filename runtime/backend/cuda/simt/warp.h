// SIMT emulator: warp operations (shuffles, votes, __syncwarp, and the all-gather that models
// mma.sync and ldmatrix). A lane's operation suspends it until every lane its mask names arrives, so
// a mask naming an exited or missing lane is an error, not a hang. Part of simt.h.
#pragma once
#include <cstring>
#include <string>
#include <type_traits>

#include "runtime/backend/cuda/simt/block.h"

namespace tandem::simt {

template <class T>
T warp_exchange(unsigned mask, T v, unsigned src_lane, const char* what) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffle of a type over 16 bytes");
  detail::Block& b = detail::block();
  detail::Thread& t = *b.current;
  const unsigned lane = t.linear % 32, base = t.linear / 32 * 32;
  if (!(mask >> lane & 1u)) detail::fail(std::string(what) + ": the calling lane is not in its mask");
  std::memcpy(&b.slots[(base + lane) * 2], &v, sizeof(T));
  detail::suspend(detail::Wait::Warp, mask, what, 0);
  if (!(mask >> src_lane & 1u))
    detail::fail(std::string(what) + ": source lane " + std::to_string(src_lane) + " is not in the mask");
  T r;
  std::memcpy(&r, &b.slots[(base + src_lane) * 2], sizeof(T));
  detail::suspend(detail::Wait::Warp, mask, what, 0);  // nobody overwrites a slot before all have read
  return r;
}

inline unsigned lane_id() { return detail::self().linear % 32; }

// Every lane of a full warp contributes `mine`; each gets all 32 contributions in lane order (the
// emulator's model of a warp-wide instruction such as mma.sync, whose operands span the lanes).
template <class T>
void warp_all_gather(const T& mine, T (&all)[32], const char* what) {
  static_assert(std::is_trivially_copyable_v<T>, "warp_all_gather of a type that is not trivially copyable");
  detail::Block& b = detail::block();
  const detail::Thread& t = *b.current;
  const size_t base = t.linear / 32 * 32, lanes = (b.threads.size() + 31) / 32 * 32;
  if (b.gather.size() < lanes * sizeof(T)) b.gather.resize(lanes * sizeof(T));  // contents kept
  std::memcpy(b.gather.data() + t.linear * sizeof(T), &mine, sizeof(T));
  detail::suspend(detail::Wait::Warp, 0xffffffffu, what, 0);
  std::memcpy(all, b.gather.data() + base * sizeof(T), 32 * sizeof(T));
  detail::suspend(detail::Wait::Warp, 0xffffffffu, what, 0);  // nobody overwrites a slot before all have read
}

}  // namespace tandem::simt

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::tandem::simt::detail::suspend(::tandem::simt::detail::Wait::Warp, mask, "__syncwarp", 0);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  unsigned lane = ::tandem::simt::lane_id();
  unsigned seg = lane & ~static_cast<unsigned>(width - 1);
  return ::tandem::simt::warp_exchange(mask, v, seg + (static_cast<unsigned>(src) & (width - 1)), "__shfl_sync");
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  unsigned lane = ::tandem::simt::lane_id();
  unsigned src = (lane & (width - 1)) + delta >= static_cast<unsigned>(width) ? lane : lane + delta;
  return ::tandem::simt::warp_exchange(mask, v, src, "__shfl_down_sync");
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  unsigned lane = ::tandem::simt::lane_id();
  unsigned src = (lane & (width - 1)) < delta ? lane : lane - delta;
  return ::tandem::simt::warp_exchange(mask, v, src, "__shfl_up_sync");
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  unsigned lane = ::tandem::simt::lane_id();
  unsigned src = lane ^ static_cast<unsigned>(lane_mask);
  if ((src & ~static_cast<unsigned>(width - 1)) != (lane & ~static_cast<unsigned>(width - 1))) src = lane;
  return ::tandem::simt::warp_exchange(mask, v, src, "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned lane = ::tandem::simt::lane_id();
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1u) bits |= (::tandem::simt::warp_exchange(mask, pred ? 1u : 0u, l, "__ballot_sync") << l);
  (void)lane;
  return bits;
}
