// SIMT emulator: the scheduler. A launch runs its blocks one at a time, a block's threads as fibers on
// this OS thread, resumed in turn until each reaches a barrier; a barrier is released when every
// thread it names waits at it, and a barrier that cannot complete is an error, not a hang. Part of
// simt.h.
#pragma once
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "runtime/backend/cuda/simt/block.h"
#include "runtime/backend/cuda/simt/run_order.h"

namespace tandem::simt {
namespace detail {

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

}  // namespace tandem::simt

// The block barrier: the scheduler releases it when every thread of the block waits at the same one.
#define __syncthreads() ::tandem::simt::detail::suspend(::tandem::simt::detail::Wait::Block, 0u, __FILE__, __LINE__)
