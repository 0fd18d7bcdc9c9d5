// The CPU allocator keeps large freed blocks for reuse. A training step frees and allocates the same
// activation sizes every step; handed back to glibc, blocks past its mmap and trim thresholds go back
// to the kernel and return as freshly zeroed pages (a small GPT: 7,000 page faults a step). Blocks of
// 64 KiB and more are kept by exact size up to a limit and reused by the next allocation of that
// size; smaller ones go straight to malloc, which keeps them in its own bins.
#pragma once
#include <cstddef>

namespace tandem::memory {

// Bytes of freed blocks the cache may hold (default 1 GiB, or the environment's TANDEM_HOST_CACHE,
// a size as parse_size reads it; 0 turns the cache off). Lowering it frees what no longer fits.
size_t host_cache_limit();
void set_host_cache_limit(size_t bytes);
// Bytes held by the cache now (not counted by in_use(): no tensor holds them).
size_t host_cache_bytes();
// Returns every cached block to the system (a failed host allocation does this before it gives up).
void release_host_cache();

}  // namespace tandem::memory
