// SIMT emulator: cp.async, 16-byte copies from global to shared memory that complete asynchronously
// (kernels/cuda/async_copy.cuh). Part of simt.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/backend/cuda/simt/block.h"
#include "runtime/backend/cuda/simt/shared_memory.h"

namespace tandem::simt {

// ---- cp.async: 16-byte copies from global to shared memory that complete asynchronously. The model
// lands each copy as late as the hardware may, at the cp_async_wait that covers its group (as a
// write by the issuing thread then), and until then fails any access to its bytes, so a kernel that
// reads a tile before waiting for it, or before the barrier after the wait, fails here instead of
// reading whatever a GPU happens to have there. ----

// Copies 16 bytes from src (zeros instead when !valid) to dst; both 16-byte aligned.
template <class T>
void cp_async_16(SharedPtr<T> dst, const void* src, bool valid) {
  detail::Block& b = detail::block();
  detail::Thread& t = *b.current;
  const SharedPtr<unsigned char> bytes = dst.template as<unsigned char>();
  const size_t offset = dst.byte_offset();
  if (offset % 16 != 0 || (valid && reinterpret_cast<uintptr_t>(src) % 16 != 0))
    detail::fail("cp.async: a 16-byte copy needs 16-byte aligned addresses");
  for (size_t i = 0; i < 16; ++i) bytes[static_cast<long long>(i)].claim();
  detail::AsyncCopy c{offset, dst.region(), t.async_groups, {}};
  if (valid) std::memcpy(c.bytes, src, 16);
  t.async_copies.push_back(c);
}

// Closes the group of the copies issued since the last commit.
inline void cp_async_commit() { ++detail::block().current->async_groups; }

// Lands every copy except those of the newest `pending` committed groups.
inline void cp_async_wait(unsigned pending) {
  detail::Block& b = detail::block();
  detail::Thread& t = *b.current;
  std::vector<detail::AsyncCopy> still;
  for (const detail::AsyncCopy& c : t.async_copies) {
    if (c.group + pending >= t.async_groups) {
      still.push_back(c);
      continue;
    }
    for (size_t i = 0; i < 16; ++i) SharedRef<unsigned char>(&b, c.offset + i, c.region).land(c.bytes[i]);
  }
  t.async_copies.swap(still);
}

}  // namespace tandem::simt
