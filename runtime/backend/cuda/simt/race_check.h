// SIMT emulator: the race checker, which every shared-memory access (shared_memory.h) goes through.
// Each byte of the block's arena has a shadow (block.h) of who wrote it last and who read it since,
// in which barrier epochs, so a read or write that no barrier separates from another thread's
// conflicting access fails here instead of giving whatever a GPU's schedule happens to give. Part
// of simt.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/backend/cuda/simt/block.h"

namespace tandem::simt::detail {

// An access of `size` bytes at `off` through a view of region r. Checks bounds; then per byte: a copy
// in flight, a read of what no thread wrote, and a race: a read or a write after another thread's
// write, or a write after another thread's read, in the same block epoch with no warp barrier between
// where both threads are in one warp.
inline void check_shared_access(Block& b, size_t off, size_t size, const SharedRegion& r, bool write) {
  Thread& t = *b.current;
  const char* access = write ? "write" : "read";
  if (off < r.begin || off + size > r.end)
    fail(r.what() + " " + access + " of bytes [" + std::to_string(off - r.begin) + ", " +
         std::to_string(off - r.begin + size) + ") out of bounds (" +
         std::to_string(r.end - r.begin) + (r.name ? " bytes)" : " bytes launched)"));
  const int32_t me = static_cast<int32_t>(t.linear);
  const int32_t warp = me / 32;
  const uint32_t block_epoch = b.block_epoch, warp_epoch = b.warp_epoch[static_cast<size_t>(warp)];
  for (size_t i = off; i < off + size; ++i) {
    Shadow& s = b.shadow[i];
    auto byte = [&] { return r.what() + " byte " + std::to_string(i - r.begin); };  // for reports only
    if (s.in_flight)
      fail(std::string(access) + " of " + byte() +
           " while a cp.async copy to it is in flight (a missing cp.async wait?)");
    if (!write && s.writer < 0)
      fail("read of uninitialised " + byte() + " (no thread of this block wrote it; a missing __syncthreads?)");
    if (s.writer >= 0 && s.writer != me && s.block_epoch == block_epoch &&
        (s.writer / 32 != warp || s.warp_epoch == warp_epoch))
      fail("race on " + byte() + ": " + access + " after a write by thread " + std::to_string(s.writer) +
           " with no barrier between (a missing __syncthreads?)");
    if (write) {
      if (s.reader != -1 && s.reader != me && s.read_block_epoch == block_epoch &&
          (s.reader_warp != warp || s.read_warp_epoch == warp_epoch))
        fail("race on " + byte() + ": write after a read by " +
             (s.reader == kMany ? std::string("other threads") : "thread " + std::to_string(s.reader)) +
             " with no barrier between (a missing __syncthreads?)");
      s = Shadow{me, block_epoch, warp_epoch};
    } else if (s.reader == -1 || s.read_block_epoch != block_epoch) {
      s.reader = me, s.reader_warp = warp, s.read_block_epoch = block_epoch, s.read_warp_epoch = warp_epoch;
    } else {
      if (s.reader != me) s.reader = kMany;
      if (s.reader_warp != warp) s.reader_warp = kMany;
      s.read_warp_epoch = warp_epoch;
    }
  }
}

}  // namespace tandem::simt::detail
