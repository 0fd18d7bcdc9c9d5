// SIMT emulator: the state of the block being run (its threads as fibers, its shared-memory arena and
// the arena's shadow for the race checker), and how a thread suspends itself at a barrier. Part of
// simt.h.
#pragma once
#include <boost/context/fiber.hpp>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "runtime/backend/cuda/simt/cuda_names.h"

namespace tandem::simt {

// What a view may reach: the dynamic bytes (name null), or one static array, named in reports.
struct SharedRegion {
  size_t begin = 0, end = 0;
  const char* name = nullptr;
  std::string what() const { return name ? "shared memory `" + std::string(name) + "`" : "dynamic shared memory"; }
};

namespace detail {

// AddressSanitizer follows a switch between stacks only when told (it keeps a fake stack and the
// stack bounds per context); other builds compile these away. start_switch before every resume,
// finish_switch first thing on the other side; a context that ends for good passes no save slot.
inline void start_switch([[maybe_unused]] void** save, [[maybe_unused]] const void* bottom,
                         [[maybe_unused]] size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(save, bottom, size);
#endif
}
inline void finish_switch([[maybe_unused]] void* save, [[maybe_unused]] const void** old_bottom,
                          [[maybe_unused]] size_t* old_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(save, old_bottom, old_size);
#endif
}

enum class Wait : uint8_t { None, Block, Warp, Done };

// A cp.async copy in flight: its bytes, read from global memory when issued, land in shared memory
// at the wait that covers its group.
struct AsyncCopy {
  size_t offset;
  SharedRegion region;  // of the view it was issued through, for the landing's checks
  unsigned group;
  unsigned char bytes[16];
};

struct Thread {
  uint3 tid{0, 0, 0};
  unsigned linear = 0;
  Wait wait = Wait::None;
  unsigned mask = 0;           // warp barrier mask
  const char* file = nullptr;  // barrier site
  int line = 0;
  boost::context::fiber fiber;  // this thread's suspended context
  boost::context::fiber sched;  // the scheduler's, while this thread runs
  bool started = false;         // its body has run (so a suspended fiber unwinds through it)
  std::vector<AsyncCopy> async_copies;  // cp.async copies issued and not yet landed
  unsigned async_groups = 0;            // cp.async groups committed
  const void* stack_bottom = nullptr;  // the fiber's stack, for the sanitizer's switch annotations
  size_t stack_size = 0;
  void* fake_stack = nullptr;  // the sanitizer's save slot while this fiber is switched out
};

// Shadow of one byte of shared memory: who wrote it last and who read it since, in which barrier
// epochs. Readers are kept as one thread or kMany, and one warp or kMany: enough to tell whether a
// write has a barrier between it and every read of the value it replaces.
constexpr int32_t kMany = -2;
struct Shadow {
  int32_t writer = -1;  // -1: not written in this block
  uint32_t block_epoch = 0;
  uint32_t warp_epoch = 0;
  int32_t reader = -1;       // -1: not read since the last write (or in this block epoch)
  int32_t reader_warp = -1;  // the readers' warp, kMany when they span warps
  uint32_t read_block_epoch = 0;
  uint32_t read_warp_epoch = 0;  // the readers' warp's epoch at the latest read
  bool in_flight = false;  // a cp.async copy to it has been issued and has not landed
};

// A static shared array's place in the block's arena, found by its declaration's site.
struct StaticShared {
  const void* site;
  size_t offset;
};

struct Block {
  std::vector<Thread> threads;
  Thread* current = nullptr;
  const char* launch_file = "";
  int launch_line = 0;
  std::vector<unsigned char> smem;  // shared memory: the dynamic bytes, then the static arrays met so far
  std::vector<Shadow> shadow;
  size_t dynamic_bytes = 0;
  std::vector<StaticShared> statics;
  std::vector<uint64_t> slots;  // warp exchange slots: [warps * 32] x 2 words
  std::vector<unsigned char> gather;  // warp all-gather slots: [warps * 32] x the gathered size
  uint32_t block_epoch = 1;
  std::vector<uint32_t> warp_epoch;
  std::exception_ptr error;
  const void* sched_bottom = nullptr;  // the scheduler's stack, learned on the first switch to a fiber
  size_t sched_size = 0;
};

inline thread_local Block* tls_block = nullptr;

inline Block& block() {
  if (!tls_block) throw KernelError("a device function was called outside an emulated kernel launch");
  return *tls_block;
}
inline Thread& self() { return *block().current; }

inline std::string where(const Block& b, const Thread& t) {
  return "kernel launched at " + std::string(b.launch_file) + ":" + std::to_string(b.launch_line) +
         ", block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
         std::to_string(blockIdx.z) + "), thread (" + std::to_string(t.tid.x) + "," + std::to_string(t.tid.y) +
         "," + std::to_string(t.tid.z) + ")";
}

[[noreturn]] inline void fail(const std::string& what) {
  Block& b = block();
  throw KernelError(where(b, *b.current) + ": " + what);
}

// Suspends the running fiber; the scheduler resumes it when its barrier is released.
inline void suspend(Wait w, unsigned mask, const char* file, int line) {
  Thread& t = self();
  t.wait = w;
  t.mask = mask;
  t.file = file;
  t.line = line;
  Block& b = block();
  start_switch(&t.fake_stack, b.sched_bottom, b.sched_size);
  try {
    t.sched = std::move(t.sched).resume();
  } catch (const boost::context::detail::forced_unwind&) {  // destroyed while suspended (see unwind)
    finish_switch(t.fake_stack, nullptr, nullptr);
    throw;
  }
  finish_switch(t.fake_stack, nullptr, nullptr);
}

}  // namespace detail
}  // namespace tandem::simt
