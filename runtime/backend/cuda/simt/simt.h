// SIMT emulator (header-only): runs CUDA kernel sources compiled by g++ as host C++ with CUDA's
// execution model. Force-included (-include) before every .cu compiled for DeviceKind::SIM.
// Blocks run one at a time; the threads of a block are fibers (Boost.Context) on one OS thread, so
// shared memory, dynamic (dynamic_shared) and static (SIMT_SHARED, which kernels spell TANDEM_SHARED),
// lives in the block's checked arena. Barriers reached by only some threads, warp operations whose
// mask names exited or missing lanes, and out-of-bounds, uninitialised or racy shared memory accesses
// throw simt::KernelError instead of hanging or silently passing.
#pragma once
#define TANDEM_SIMT_EMULATOR 1

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/env_settings.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#define __global__
#define __device__
#define __host__
// A plain `__shared__` array would be an unchecked static shared by the block's fibers: declare static
// shared memory with TANDEM_SHARED(type, name) (platform.cuh), which the emulator checks.
#define __shared__ declare_static_shared_memory_with_TANDEM_SHARED
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The current thread's coordinates; the scheduler sets them before resuming each fiber.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

// Stand-ins for the CUDA runtime types the host code names.
struct SimStream;
using cudaStream_t = SimStream*;

namespace tandem::simt {

class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxDynamicShared = 48 * 1024;  // the default opt-in limit on every arch we build
constexpr size_t kFiberStack = 128 * 1024;

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

// Stacks reused across blocks and launches (one pool per OS thread running kernels), given back to
// the system when that thread exits. A fiber's entry frames never return, so the sanitizer's poison
// of their redzones stays in its shadow of the stack: cleared before the unmap, or memory mapped
// there later (Open MPI's, at exit) read as a stack overflow on its first write.
struct StackPool {
  boost::context::protected_fixedsize_stack base{kFiberStack};
  std::vector<boost::context::stack_context> free;
  ~StackPool() {
    for (auto& s : free) {
#if defined(__SANITIZE_ADDRESS__)
      __asan_unpoison_memory_region(static_cast<char*>(s.sp) - s.size, s.size);
#endif
      base.deallocate(s);
    }
  }
};
inline thread_local StackPool tls_stacks;
struct PooledStack {
  Thread* owner;  // told where its stack is (it grows down from sp)
  boost::context::stack_context allocate() {
    boost::context::stack_context s;
    if (tls_stacks.free.empty()) {
      s = tls_stacks.base.allocate();
    } else {
      s = tls_stacks.free.back();
      tls_stacks.free.pop_back();
    }
    owner->stack_bottom = static_cast<char*>(s.sp) - s.size;
    owner->stack_size = s.size;
    return s;
  }
  void deallocate(boost::context::stack_context& s) noexcept { tls_stacks.free.push_back(s); }
};

inline std::string describe_waits(const Block& b) {
  std::string out;
  int shown = 0;
  for (const Thread& t : b.threads) {
    if (shown == 6) {
      out += " ...";
      break;
    }
    ++shown;
    out += " thread " + std::to_string(t.linear) + ": ";
    switch (t.wait) {
      case Wait::Done: out += "exited;"; break;
      case Wait::None: out += "running;"; break;
      case Wait::Block: out += "__syncthreads at " + std::string(t.file) + ":" + std::to_string(t.line) + ";"; break;
      case Wait::Warp: out += "warp sync at " + std::string(t.file) + ":" + std::to_string(t.line) + ";"; break;
    }
  }
  return out;
}

// Releases every complete warp barrier; returns whether one was released.
inline bool release_warps(Block& b) {
  bool released = false;
  const size_t n = b.threads.size();
  for (size_t i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    if (t.wait != Wait::Warp) continue;
    size_t base = i / 32 * 32;
    bool complete = true;
    for (unsigned lane = 0; lane < 32; ++lane) {
      if (!(t.mask >> lane & 1u)) continue;
      size_t j = base + lane;
      if (j >= n)
        throw KernelError(where(b, t) + ": warp operation at " + t.file + ":" + std::to_string(t.line) +
                          " has mask 0x" + [&] { char s[16]; std::snprintf(s, sizeof s, "%08x", t.mask); return std::string(s); }() +
                          " naming lane " + std::to_string(lane) + ", which the block does not have (" +
                          std::to_string(n) + " threads)");
      const Thread& o = b.threads[j];
      if (o.wait == Wait::Done)
        throw KernelError(where(b, t) + ": warp operation at " + t.file + ":" + std::to_string(t.line) +
                          " waits for lane " + std::to_string(lane) + ", which has exited");
      if (o.wait != Wait::Warp || o.mask != t.mask) complete = false;
    }
    if (!complete) continue;
    for (unsigned lane = 0; lane < 32; ++lane)
      if (t.mask >> lane & 1u) b.threads[base + lane].wait = Wait::None;
    ++b.warp_epoch[i / 32];
    released = true;
  }
  return released;
}

// Releases the block barrier when every thread waits at it; throws when only some can reach it.
inline bool release_block(Block& b) {
  size_t at_barrier = 0, done = 0;
  const Thread* first = nullptr;
  for (const Thread& t : b.threads) {
    if (t.wait == Wait::Block) {
      ++at_barrier;
      if (!first) first = &t;
    } else if (t.wait == Wait::Done) {
      ++done;
    }
  }
  if (at_barrier == 0) return false;
  if (at_barrier + done < b.threads.size()) return false;  // others still at warp barriers
  if (done > 0)
    throw KernelError(where(b, *first) + ": __syncthreads at " + first->file + ":" + std::to_string(first->line) +
                      " reached by " + std::to_string(at_barrier) + " of " + std::to_string(b.threads.size()) +
                      " threads; the others exited (a barrier in divergent code):" + describe_waits(b));
  for (const Thread& t : b.threads)
    if (t.file != first->file || t.line != first->line)
      throw KernelError(where(b, t) + ": threads wait at different __syncthreads (" + first->file + ":" +
                        std::to_string(first->line) + " and " + t.file + ":" + std::to_string(t.line) + ")");
  for (Thread& t : b.threads) t.wait = Wait::None;
  ++b.block_epoch;
  return true;
}

// Destroys every thread's fiber; one still suspended is resumed to unwind its stack (Boost throws
// forced_unwind in it), a switch the sanitizer is told of like any other.
inline void unwind(Block& b) {
  for (Thread& t : b.threads) {
    if (!t.fiber) continue;
    void* save = nullptr;
    if (t.started) start_switch(&save, t.stack_bottom, t.stack_size);
    t.fiber = boost::context::fiber();
    if (t.started) finish_switch(save, nullptr, nullptr);
  }
  b.threads.clear();
}

template <class Body>
void run_block(Block& b, unsigned nthreads, Body& body) {
  unwind(b);
  b.threads.resize(nthreads);
  for (unsigned i = 0; i < nthreads; ++i) {
    Thread& t = b.threads[i];
    t.linear = i;
    t.tid = uint3{i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y)};
    t.fiber = boost::context::fiber(std::allocator_arg, PooledStack{&t}, [&b, &t, &body](boost::context::fiber&& sched) {
      finish_switch(nullptr, &b.sched_bottom, &b.sched_size);
      t.sched = std::move(sched);
      t.started = true;
      try {
        body();
      } catch (const boost::context::detail::forced_unwind&) {
        start_switch(nullptr, b.sched_bottom, b.sched_size);  // this fiber ends: back to the unwinder
        throw;
      } catch (...) {
        if (!b.error) b.error = std::current_exception();
      }
      t.wait = Wait::Done;
      start_switch(nullptr, b.sched_bottom, b.sched_size);  // this fiber ends: its fake stack goes
      return std::move(t.sched);
    });
  }
  std::fill(b.smem.begin(), b.smem.end(), static_cast<unsigned char>(0xff));  // NaN-poisoned
  std::fill(b.shadow.begin(), b.shadow.end(), Shadow{});
  std::fill(b.warp_epoch.begin(), b.warp_epoch.end(), 0u);
  b.block_epoch = 1;
  for (;;) {
    const RunSequence sequence(run_order_setting(), b.threads.size());
    for (size_t i = 0; i < b.threads.size(); ++i) {
      Thread& t = b.threads[sequence[i]];
      if (t.wait != Wait::None) continue;
      b.current = &t;
      threadIdx = t.tid;
      void* save = nullptr;
      start_switch(&save, t.stack_bottom, t.stack_size);
      t.fiber = std::move(t.fiber).resume();
      finish_switch(save, nullptr, nullptr);
      if (b.error) std::rethrow_exception(b.error);
    }
    bool all_done = std::all_of(b.threads.begin(), b.threads.end(), [](const Thread& t) { return t.wait == Wait::Done; });
    if (all_done) return;
    bool progressed = release_warps(b);
    progressed = release_block(b) || progressed;
    if (!progressed) throw KernelError(where(b, b.threads[0]) + ": deadlock: no barrier can complete:" + describe_waits(b));
  }
}

struct BlockScope {  // restores the emulator's thread-locals, unwinds fibers on error
  Block* saved;
  explicit BlockScope(Block* b) : saved(tls_block) { tls_block = b; }
  ~BlockScope() { tls_block = saved; }
};

}  // namespace detail

// Runs kernel(params...) over grid x block; params are converted to the kernel's parameter types once.
template <class... P, class... A>
void launch(const char* file, int line, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: wrong number of kernel arguments");
  const unsigned long long nthreads = 1ull * block.x * block.y * block.z;
  const unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
  auto at = [&] { return std::string(file) + ":" + std::to_string(line) + ": "; };
  if (nthreads == 0 || nthreads > kMaxThreadsPerBlock || block.z > 64)
    throw KernelError(at() + "invalid block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," +
                      std::to_string(block.z) + "): 1..1024 threads per block");
  if (nblocks == 0 || grid.y > 65535 || grid.z > 65535)
    throw KernelError(at() + "invalid grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                      std::to_string(grid.z) + "): launch nothing for empty work instead");
  if (shared_bytes > kMaxDynamicShared)
    throw KernelError(at() + std::to_string(shared_bytes) + " bytes of dynamic shared memory exceed the 48 KiB limit");
  std::tuple<std::decay_t<P>...> params(static_cast<std::decay_t<P>>(std::forward<A>(args))...);
  auto body = [&] { std::apply(kernel, params); };

  detail::Block b;
  b.launch_file = file;
  b.launch_line = line;
  b.smem.resize(shared_bytes);
  b.shadow.resize(shared_bytes);
  b.dynamic_bytes = shared_bytes;
  b.slots.resize((nthreads + 31) / 32 * 32 * 2);
  b.warp_epoch.resize((nthreads + 31) / 32);
  detail::BlockScope scope(&b);
  const uint3 saved_tid = threadIdx, saved_bid = blockIdx;
  const dim3 saved_bdim = blockDim, saved_gdim = gridDim;
  blockDim = block;
  gridDim = grid;
  const detail::RunSequence sequence(detail::run_order_setting(), nblocks);
  try {
    for (unsigned long long i = 0; i < nblocks; ++i) {
      const unsigned long long k = sequence[i];
      blockIdx = uint3{static_cast<unsigned>(k % grid.x), static_cast<unsigned>(k / grid.x % grid.y),
                       static_cast<unsigned>(k / grid.x / grid.y)};
      detail::run_block(b, static_cast<unsigned>(nthreads), body);
    }
  } catch (...) {
    detail::unwind(b);
    threadIdx = saved_tid, blockIdx = saved_bid, blockDim = saved_bdim, gridDim = saved_gdim;
    throw;
  }
  detail::unwind(b);
  threadIdx = saved_tid, blockIdx = saved_bid, blockDim = saved_bdim, gridDim = saved_gdim;
}

// ---- shared memory: bounds- and race-checked views into the block's arena ----

template <class T>
class SharedRef {
 public:
  SharedRef(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  operator T() const {
    check(false);
    T v;
    std::memcpy(&v, b_->smem.data() + off_, sizeof(T));
    return v;
  }
  SharedRef& operator=(const T& v) {
    check(true);
    std::memcpy(b_->smem.data() + off_, &v, sizeof(T));
    return *this;
  }
  SharedRef& operator=(const SharedRef& o) { return *this = static_cast<T>(o); }
  // A cp.async copy to here is issued: checked as a write, and until it lands (land()) any access
  // fails, since the bytes may change at any moment.
  void claim() const {
    check(true);
    for (size_t i = off_; i < off_ + sizeof(T); ++i) b_->shadow[i].in_flight = true;
  }
  void land(const T& v) const {
    for (size_t i = off_; i < off_ + sizeof(T); ++i) b_->shadow[i].in_flight = false;
    SharedRef(b_, off_, r_) = v;
  }
  SharedRef& operator+=(const T& v) { return *this = static_cast<T>(*this) + v; }
  SharedRef& operator-=(const T& v) { return *this = static_cast<T>(*this) - v; }
  SharedRef& operator*=(const T& v) { return *this = static_cast<T>(*this) * v; }

 private:
  // Bounds; then per byte: a copy in flight, a read of what no thread wrote, and a race: a read or a
  // write after another thread's write, or a write after another thread's read, in the same block
  // epoch with no warp barrier between where both threads are in one warp.
  void check(bool write) const {
    detail::Thread& t = *b_->current;
    const char* access = write ? "write" : "read";
    if (off_ < r_.begin || off_ + sizeof(T) > r_.end)
      detail::fail(r_.what() + " " + access + " of bytes [" + std::to_string(off_ - r_.begin) + ", " +
                   std::to_string(off_ - r_.begin + sizeof(T)) + ") out of bounds (" +
                   std::to_string(r_.end - r_.begin) + (r_.name ? " bytes)" : " bytes launched)"));
    const int32_t me = static_cast<int32_t>(t.linear);
    const int32_t warp = me / 32;
    const uint32_t block_epoch = b_->block_epoch, warp_epoch = b_->warp_epoch[static_cast<size_t>(warp)];
    for (size_t i = off_; i < off_ + sizeof(T); ++i) {
      detail::Shadow& s = b_->shadow[i];
      auto byte = [&] { return r_.what() + " byte " + std::to_string(i - r_.begin); };  // for reports only
      if (s.in_flight)
        detail::fail(std::string(access) + " of " + byte() +
                     " while a cp.async copy to it is in flight (a missing cp.async wait?)");
      if (!write && s.writer < 0)
        detail::fail("read of uninitialised " + byte() + " (no thread of this block wrote it; a missing __syncthreads?)");
      if (s.writer >= 0 && s.writer != me && s.block_epoch == block_epoch &&
          (s.writer / 32 != warp || s.warp_epoch == warp_epoch))
        detail::fail("race on " + byte() + ": " + access + " after a write by thread " + std::to_string(s.writer) +
                     " with no barrier between (a missing __syncthreads?)");
      if (write) {
        if (s.reader != -1 && s.reader != me && s.read_block_epoch == block_epoch &&
            (s.reader_warp != warp || s.read_warp_epoch == warp_epoch))
          detail::fail("race on " + byte() + ": write after a read by " +
                       (s.reader == detail::kMany ? std::string("other threads") : "thread " + std::to_string(s.reader)) +
                       " with no barrier between (a missing __syncthreads?)");
        s = detail::Shadow{me, block_epoch, warp_epoch};
      } else if (s.reader == -1 || s.read_block_epoch != block_epoch) {
        s.reader = me, s.reader_warp = warp, s.read_block_epoch = block_epoch, s.read_warp_epoch = warp_epoch;
      } else {
        if (s.reader != me) s.reader = detail::kMany;
        if (s.reader_warp != warp) s.reader_warp = detail::kMany;
        s.read_warp_epoch = warp_epoch;
      }
    }
  }
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

template <class T>
class SharedPtr {
 public:
  SharedPtr(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  SharedRef<T> operator[](long long i) const {
    if (i < 0) detail::fail("negative index " + std::to_string(i) + " into " + r_.what());
    return SharedRef<T>(b_, off_ + static_cast<size_t>(i) * sizeof(T), r_);
  }
  SharedPtr operator+(long long i) const { return SharedPtr(b_, off_ + static_cast<size_t>(i) * sizeof(T), r_); }
  template <class U>
  SharedPtr<U> as() const { return SharedPtr<U>(b_, off_, r_); }
  size_t byte_offset() const { return off_; }
  const SharedRegion& region() const { return r_; }

 private:
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

template <class T>
SharedPtr<T> dynamic_shared() {
  detail::Block& b = detail::block();
  return SharedPtr<T>(&b, 0, SharedRegion{0, b.dynamic_bytes, nullptr});
}

// A static shared array (A = E[N], E[N][M], ...): each index checked against its extent, the
// elements checked as dynamic shared memory's are.
template <class A>
class SharedArray;
template <class E, size_t N>
class SharedArray<E[N]> {
 public:
  SharedArray(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  auto operator[](long long i) const {
    if (i < 0 || static_cast<unsigned long long>(i) >= N)
      detail::fail("index " + std::to_string(i) + " out of bounds of " + r_.what() + " (extent " + std::to_string(N) +
                   ")");
    const size_t at = off_ + static_cast<size_t>(i) * sizeof(E);
    if constexpr (std::is_array_v<E>) return SharedArray<E>(b_, at, r_);
    else return SharedRef<E>(b_, at, r_);
  }

 private:
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

// The block's static shared variable declared at `site` (a static local of the declaration, so each
// template instance has its own), placed in the arena after the dynamic bytes the first time a
// thread of the launch reaches it, NaN-poisoned and unwritten at every block's start as the rest.
template <class A>
auto static_shared(const void* site, const char* name) {
  static_assert(std::is_trivially_copyable_v<std::remove_all_extents_t<A>>, "shared memory of a non-trivial type");
  detail::Block& b = detail::block();
  size_t off = 0;
  const auto found = std::find_if(b.statics.begin(), b.statics.end(),
                                  [&](const detail::StaticShared& s) { return s.site == site; });
  if (found != b.statics.end()) {
    off = found->offset;
  } else {
    off = (b.smem.size() + 15) / 16 * 16;
    if (off + sizeof(A) > kMaxDynamicShared)
      detail::fail("static shared memory `" + std::string(name) + "` (" + std::to_string(sizeof(A)) +
                   " bytes) beside the launch's other " + std::to_string(b.smem.size()) +
                   " bytes of shared memory exceeds the 48 KiB a block may use");
    b.smem.resize(off + sizeof(A), static_cast<unsigned char>(0xff));
    b.shadow.resize(off + sizeof(A));
    b.statics.push_back(detail::StaticShared{site, off});
  }
  const SharedRegion r{off, off + sizeof(A), name};
  if constexpr (std::is_array_v<A>) return SharedArray<A>(&b, off, r);
  else return SharedRef<A>(&b, off, r);
}

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

// ---- warp-level exchange ----

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

// ---- CUDA device intrinsics used by the kernels ----
#define __syncthreads() ::tandem::simt::detail::suspend(::tandem::simt::detail::Wait::Block, 0u, __FILE__, __LINE__)
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
// Blocks run one after another and a block's warps on one host thread: memory is already ordered
// and coherent, so a fence is nothing and an L2 load a plain one.
inline void __threadfence() {}
template <class T>
T __ldcg(const T* p) { return *p; }
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
template <class T>
T __ldg(const T* p) { return *p; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// Adds rounded as operations of their own, as the device's: never fused with a product feeding
// them. Out of line, so that the host compiler cannot contract across the call.
[[gnu::noinline]] inline float __fadd_rn(float a, float b) { return a + b; }
[[gnu::noinline]] inline double __dadd_rn(double a, double b) { return a + b; }

// Declares the block's static shared variable `name` of `type` (T, T[N], T[N][M], ...; a type with a
// comma needs an alias) as a checked view: TANDEM_SHARED's emulator form.
#define SIMT_SHARED(type, name)         \
  static char name##_simt_shared_site; \
  auto name = ::tandem::simt::static_shared<type>(&name##_simt_shared_site, #name)
