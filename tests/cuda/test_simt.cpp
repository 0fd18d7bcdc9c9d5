// The SIMT emulator's own tests: CUDA's execution model (indices, barriers, shared memory, warp
// shuffles, atomics) and the bugs it must report instead of hanging: a barrier reached by some
// threads only, a missing __syncthreads (a read or write after another thread's write, a write
// after another thread's read), out-of-bounds or uninitialised shared memory, dynamic or static, bad
// warp masks, a cp.async copy read before its wait.
#include "runtime/backend/cuda/simt/simt.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

using tandem::simt::KernelError;
#define LAUNCH(...) ::tandem::simt::launch(__FILE__, __LINE__, __VA_ARGS__)

namespace {

__global__ void record_indices(unsigned* out) {
  unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  out[b * blockDim.x * blockDim.y * blockDim.z + t] = b * 10000 + t;
}

TEST(Simt, EveryThreadOfEveryBlockRunsOnceWithItsIndices) {
  dim3 grid(3, 2, 1), block(5, 3, 2);
  std::vector<unsigned> out(6 * 30, 0xdeadu);
  LAUNCH(record_indices, grid, block, 0, out.data());
  for (unsigned b = 0; b < 6; ++b)
    for (unsigned t = 0; t < 30; ++t) EXPECT_EQ(out[b * 30 + t], b * 10000 + t);
}

// Each block takes a ticket as it starts: out[ticket] = its linear index.
__global__ void record_block_order(unsigned* next, unsigned* out) {
  if (threadIdx.x != 0) return;
  out[atomicAdd(next, 1u)] = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}

// Each thread of one block takes a ticket as it starts: out[ticket] = its linear index.
__global__ void record_thread_order(unsigned* next, unsigned* out) {
  out[atomicAdd(next, 1u)] = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

// The order under `order` of the 60 blocks of a 5 x 4 x 3 grid (threads: false) or the 60 threads
// of a 5 x 4 x 3 block (threads: true).
std::vector<unsigned> run_order_of(tandem::simt::RunOrder order, bool threads) {
  const tandem::simt::RunOrder before = tandem::simt::set_run_order(order);
  unsigned next = 0;
  std::vector<unsigned> out(60, 0xdeadu);
  if (threads) LAUNCH(record_thread_order, dim3(1), dim3(5, 4, 3), 0, &next, out.data());
  else LAUNCH(record_block_order, dim3(5, 4, 3), dim3(32), 0, &next, out.data());
  tandem::simt::set_run_order(before);
  EXPECT_EQ(next, 60u);
  return out;
}

TEST(Simt, BlocksAndThreadsRunInTheChosenOrderEachExactlyOnce) {
  using tandem::simt::RunOrder;
  std::vector<unsigned> forward(60), reverse(60);
  std::iota(forward.begin(), forward.end(), 0u);
  std::iota(reverse.rbegin(), reverse.rend(), 0u);
  for (bool threads : {false, true}) {
    SCOPED_TRACE(threads ? "threads" : "blocks");
    EXPECT_EQ(run_order_of(RunOrder::Forward, threads), forward);
    EXPECT_EQ(run_order_of(RunOrder::Reverse, threads), reverse);
    // Shuffled: each once, in an order other than either, and another order the next time.
    const std::vector<unsigned> first = run_order_of(RunOrder::Shuffle, threads),
                                second = run_order_of(RunOrder::Shuffle, threads);
    for (const auto& order : {first, second}) {
      std::vector<unsigned> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, forward);
      EXPECT_NE(order, forward);
      EXPECT_NE(order, reverse);
    }
    EXPECT_NE(first, second);
  }
}

// Thread 0 publishes a value through global memory that the others read, without the barrier
// between (a planted bug), or with it. Shared memory would report the race in any order; global
// memory is where only the order shows it.
template <bool sync>
__global__ void publish_from_thread_zero(int value, int* slot, int* out) {
  if (threadIdx.x == 0) *slot = value;
  if (sync) __syncthreads();
  out[threadIdx.x] = *slot;
}

TEST(Simt, OtherOrdersShowAMissingBarrierThatTheDefaultOrderHides) {
  using tandem::simt::RunOrder;
  auto run = [](RunOrder order, bool sync, int value) {
    const RunOrder before = tandem::simt::set_run_order(order);
    std::vector<int> out(64, -1);
    int slot = -1;
    LAUNCH(sync ? publish_from_thread_zero<true> : publish_from_thread_zero<false>, dim3(1), dim3(64), 0, value,
           &slot, out.data());
    tandem::simt::set_run_order(before);
    return std::count(out.begin(), out.end(), value);
  };
  EXPECT_EQ(run(RunOrder::Forward, false, 7), 64);  // thread 0 ran first: the bug is hidden
  EXPECT_LT(run(RunOrder::Reverse, false, 8), 64);
  EXPECT_LT(run(RunOrder::Shuffle, false, 9), 64);
  for (RunOrder order : {RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle})
    EXPECT_EQ(run(order, true, 10 + static_cast<int>(order)), 64);
}

// Tree reduction through static shared memory; `sync` false drops the barriers (a planted bug).
template <bool sync>
__global__ void block_sum_static(const float* in, float* out, int n) {
  SIMT_SHARED(float[64], buf);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? in[i] : 0.0f;
  if (sync) __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    if (sync) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

TEST(Simt, StaticSharedReductionWithBarriersIsRight) {
  std::vector<float> in(150);
  std::iota(in.begin(), in.end(), 1.0f);
  std::vector<float> out(3);
  LAUNCH(block_sum_static<true>, dim3(3), dim3(64), 0, in.data(), out.data(), 150);
  EXPECT_EQ(out[0], 64.0f * 65 / 2);
  EXPECT_EQ(out[1], (128.0f * 129 - 64.0f * 65) / 2);
  EXPECT_EQ(out[2], (150.0f * 151 - 128.0f * 129) / 2);
}

TEST(Simt, MissingSyncthreadsOnStaticSharedIsReportedInEveryOrder) {
  using tandem::simt::RunOrder;
  std::vector<float> in(64, 1.0f);
  std::vector<float> out(1, 0.0f);
  // Until static shared memory was checked, this gave a wrong sum in the default order and the right
  // one run last to first.
  for (RunOrder order : {RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle}) {
    const RunOrder before = tandem::simt::set_run_order(order);
    try {
      LAUNCH(block_sum_static<false>, dim3(1), dim3(64), 0, in.data(), out.data(), 64);
      ADD_FAILURE() << "the missing barrier went unnoticed in order " << static_cast<int>(order);
    } catch (const KernelError& e) {
      EXPECT_NE(std::string(e.what()).find("shared memory `buf`"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("missing __syncthreads"), std::string::npos) << e.what();
    }
    tandem::simt::set_run_order(before);
  }
}

// A block reduction as reduce.cuh's: a slot per warp, every thread reads them all. Called twice,
// it needs its trailing barrier (`tail`): without it a warp's last lane writes its slot for the
// second call while other threads may still be reading the first call's.
template <bool tail>
__device__ float warp_slots_sum(float v) {
  SIMT_SHARED(float[32], slots);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 31) slots[warp] = v;
  __syncthreads();
  float s = 0;
  for (unsigned w = 0; w < warps; ++w) s += slots[w];
  if (tail) __syncthreads();
  return s;
}
template <bool tail>
__global__ void sum_twice(float* out) {
  const float first = warp_slots_sum<tail>(1.0f);
  const float second = warp_slots_sum<tail>(first);
  if (threadIdx.x == 0) out[blockIdx.x] = second;
}

TEST(Simt, WriteAfterAnotherThreadsReadWithoutBarrierIsARace) {
  using tandem::simt::RunOrder;
  std::vector<float> out(3, 0.0f);
  LAUNCH(sum_twice<true>, dim3(3), dim3(64), 0, out.data());
  for (float v : out) EXPECT_EQ(v, 4.0f);  // 2 warps: 1 + 1, then 2 + 2
  // In the default order threads 0-30 have read the slots when thread 31 overwrites its own: the
  // write after their reads is what is reported. In other orders a later read may be the one.
  for (RunOrder order : {RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle}) {
    const RunOrder before = tandem::simt::set_run_order(order);
    try {
      LAUNCH(sum_twice<false>, dim3(3), dim3(64), 0, out.data());
      ADD_FAILURE() << "the missing trailing barrier went unnoticed in order " << static_cast<int>(order);
    } catch (const KernelError& e) {
      EXPECT_NE(std::string(e.what()).find("race on shared memory `slots`"), std::string::npos) << e.what();
      if (order == RunOrder::Forward) {
        EXPECT_NE(std::string(e.what()).find("write after a read by other threads"), std::string::npos) << e.what();
      }
    }
    tandem::simt::set_run_order(before);
  }
}

// Lanes of one warp read a value, then lane 0 overwrites it: a __syncwarp between is enough (the
// readers are all in the writer's warp); without it the write races with the reads.
template <bool syncwarp>
__global__ void warp_reads_then_lane_zero_writes(float* out) {
  auto buf = tandem::simt::dynamic_shared<float>();
  if (threadIdx.x == 0) buf[0] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = buf[0];
  if (syncwarp) __syncwarp();
  if (threadIdx.x == 0) buf[0] = 2.0f;
}

TEST(Simt, AWarpBarrierOrdersAWriteAfterItsOwnLanesReads) {
  std::vector<float> out(32, 0.0f);
  LAUNCH(warp_reads_then_lane_zero_writes<true>, dim3(1), dim3(32), sizeof(float), out.data());
  for (float v : out) EXPECT_EQ(v, 1.0f);
  EXPECT_THROW(LAUNCH(warp_reads_then_lane_zero_writes<false>, dim3(1), dim3(32), sizeof(float), out.data()),
               KernelError);
}

// Static shared memory: a 2-D array's rows are checked against their extent; nothing carries over
// from the block before (each block's arena is poisoned and unwritten); a device function's static
// array is one per block however often it is called, and two declarations are two arrays.
__global__ void tile_rows(float* out, int column) {
  SIMT_SHARED(float[2][33], tile);
  SIMT_SHARED(int, count);
  if (threadIdx.x < 2) tile[threadIdx.x][column] = static_cast<float>(blockIdx.x * 10 + threadIdx.x);
  if (threadIdx.x == 0) count = static_cast<int>(blockIdx.x) + 100;
  __syncthreads();
  if (threadIdx.x < 2) out[blockIdx.x * 3 + threadIdx.x] = tile[threadIdx.x][column];
  if (threadIdx.x == 2) out[blockIdx.x * 3 + 2] = static_cast<float>(count);
}
__global__ void read_what_an_earlier_block_wrote(float* out) {
  SIMT_SHARED(float[4], kept);
  if (blockIdx.x == 0) kept[threadIdx.x] = 7.0f;  // blocks 1.. read it without writing
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = kept[threadIdx.x];
}

TEST(Simt, StaticSharedArraysAreCheckedAndFreshInEveryBlock) {
  std::vector<float> out(6, 0.0f);
  LAUNCH(tile_rows, dim3(2), dim3(32), 0, out.data(), 32);
  EXPECT_EQ(out, (std::vector<float>{0, 1, 100, 10, 11, 101}));
  try {
    LAUNCH(tile_rows, dim3(2), dim3(32), 0, out.data(), 33);  // one past a row's end
    FAIL() << "the out-of-bounds index went unnoticed";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("index 33 out of bounds of shared memory `tile` (extent 33)"),
              std::string::npos)
        << e.what();
  }
  std::vector<float> kept(8, 0.0f);
  try {
    LAUNCH(read_what_an_earlier_block_wrote, dim3(2), dim3(4), 0, kept.data());
    FAIL() << "block 1 read block 0's static shared memory";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("read of uninitialised shared memory `kept`"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("block (1,0,0)"), std::string::npos) << e.what();
  }
}

__global__ void large_static(float* out) {
  SIMT_SHARED(float[8192], big);  // 32 KiB
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

TEST(Simt, StaticAndDynamicSharedMemoryOver48KiBIsReported) {
  std::vector<float> out(32);
  LAUNCH(large_static, dim3(1), dim3(32), 16 * 1024, out.data());  // 48 KiB in all: fits
  EXPECT_EQ(out[0], 1.0f);
  try {
    LAUNCH(large_static, dim3(1), dim3(32), 16 * 1024 + 16, out.data());
    FAIL() << "48 KiB and 16 bytes of shared memory went unnoticed";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the 48 KiB"), std::string::npos) << e.what();
  }
}

template <bool sync>
__global__ void block_sum_dynamic(const float* in, float* out) {
  auto buf = tandem::simt::dynamic_shared<float>();
  buf[threadIdx.x] = in[threadIdx.x];
  if (sync) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned j = 0; j < blockDim.x; ++j) s += buf[j];
    out[0] = s;
  }
}

TEST(Simt, MissingSyncthreadsOnDynamicSharedIsReported) {
  std::vector<float> in(40, 2.0f), out(1);
  LAUNCH(block_sum_dynamic<true>, dim3(1), dim3(40), 40 * sizeof(float), in.data(), out.data());
  EXPECT_EQ(out[0], 80.0f);
  try {
    LAUNCH(block_sum_dynamic<false>, dim3(1), dim3(40), 40 * sizeof(float), in.data(), out.data());
    FAIL() << "the missing barrier went unnoticed";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("missing __syncthreads"), std::string::npos) << e.what();
  }
}

__global__ void racy_neighbour_read(float* out) {
  auto buf = tandem::simt::dynamic_shared<float>();
  buf[threadIdx.x] = static_cast<float>(threadIdx.x);
  // No barrier: thread t reads what thread t-1 wrote in the same phase.
  out[threadIdx.x] = threadIdx.x > 0 ? static_cast<float>(buf[threadIdx.x - 1]) : 0.0f;
}

TEST(Simt, ReadAfterAnotherThreadsWriteWithoutBarrierIsARace) {
  std::vector<float> out(32);
  EXPECT_THROW(LAUNCH(racy_neighbour_read, dim3(1), dim3(32), 32 * sizeof(float), out.data()), KernelError);
}

// Each thread copies its neighbour's 16 bytes of `in` into shared memory with cp.async and reads
// them back after the barrier; `wait` false leaves the copy in flight, `barrier` false skips the
// barrier that makes other threads' copies visible.
__global__ void async_neighbour_copy(const float* in, float* out, bool wait, bool barrier) {
  auto buf = tandem::simt::dynamic_shared<float>();
  const unsigned next = (threadIdx.x + 1) % blockDim.x;
  tandem::simt::cp_async_16(buf + 4 * next, in + 4 * next, true);
  tandem::simt::cp_async_commit();
  if (wait) tandem::simt::cp_async_wait(0);
  if (barrier) __syncthreads();
  out[threadIdx.x] = buf[4 * threadIdx.x];
}

alignas(16) float async_in[4 * 8];

TEST(Simt, AsyncCopiesLandAtTheirWaitAndNeedTheBarrier) {
  std::iota(std::begin(async_in), std::end(async_in), 1.0f);
  std::vector<float> out(8, 0.0f);
  LAUNCH(async_neighbour_copy, dim3(1), dim3(8), sizeof(async_in), async_in, out.data(), true, true);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(out[static_cast<size_t>(t)], async_in[4 * t]) << t;
  // Read while in flight (no wait), or before the barrier that orders the other threads' copies.
  EXPECT_THROW(LAUNCH(async_neighbour_copy, dim3(1), dim3(8), sizeof(async_in), async_in, out.data(), false, true),
               KernelError);
  EXPECT_THROW(LAUNCH(async_neighbour_copy, dim3(1), dim3(8), sizeof(async_in), async_in, out.data(), true, false),
               KernelError);
}

// A wait that leaves the newest group pending: the older group's copy has landed, the newer's not.
__global__ void async_two_groups(const float* in, float* out) {
  auto buf = tandem::simt::dynamic_shared<float>();
  buf[4] = -1.0f;  // what the second copy will overwrite
  tandem::simt::cp_async_16(buf, in, true);
  tandem::simt::cp_async_commit();
  out[1] = buf[4];  // before the second copy is even issued
  tandem::simt::cp_async_16(buf + 4, in + 4, true);
  tandem::simt::cp_async_commit();
  tandem::simt::cp_async_wait(1);
  out[0] = buf[0];
  tandem::simt::cp_async_wait(0);
  out[2] = buf[4];
}

TEST(Simt, AsyncCopyWaitCountsGroups) {
  std::iota(std::begin(async_in), std::end(async_in), 1.0f);
  std::vector<float> out(3, 0.0f);
  LAUNCH(async_two_groups, dim3(1), dim3(1), 8 * sizeof(float), async_in, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(out[2], 5.0f);
}

__global__ void read_past_shared(float* out, int extra) {
  auto buf = tandem::simt::dynamic_shared<float>();
  buf[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x + extra];
}

TEST(Simt, OutOfBoundsSharedReadIsReported) {
  std::vector<float> out(32);
  LAUNCH(read_past_shared, dim3(1), dim3(32), 32 * sizeof(float), out.data(), 0);
  try {
    LAUNCH(read_past_shared, dim3(1), dim3(32), 32 * sizeof(float), out.data(), 1);
    FAIL() << "the out-of-bounds read went unnoticed";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("out of bounds"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("thread (31,0,0)"), std::string::npos) << e.what();
  }
}

__global__ void barrier_after_early_exit(int* out, int n) {
  if (static_cast<int>(threadIdx.x) >= n) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(Simt, BarrierReachedBySomeThreadsIsReportedNotHung) {
  std::vector<int> out(64);
  LAUNCH(barrier_after_early_exit, dim3(1), dim3(64), 0, out.data(), 64);
  try {
    LAUNCH(barrier_after_early_exit, dim3(1), dim3(64), 0, out.data(), 40);
    FAIL() << "a barrier in divergent code went unnoticed";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("reached by 40 of 64"), std::string::npos) << e.what();
  }
}

__global__ void divergent_barriers(int* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

TEST(Simt, ThreadsAtDifferentBarriersAreReported) {
  std::vector<int> out(32);
  EXPECT_THROW(LAUNCH(divergent_barriers, dim3(1), dim3(32), 0, out.data()), KernelError);
}

__global__ void warp_sums(const int* in, int* out) {
  int v = in[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  int down = in[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) down += __shfl_down_sync(0xffffffffu, down, o);
  int first = __shfl_sync(0xffffffffu, in[threadIdx.x], 0);
  int up = __shfl_up_sync(0xffffffffu, in[threadIdx.x], 1);
  unsigned ballot = __ballot_sync(0xffffffffu, in[threadIdx.x] % 2);
  out[threadIdx.x * 5 + 0] = v;
  out[threadIdx.x * 5 + 1] = down;
  out[threadIdx.x * 5 + 2] = first;
  out[threadIdx.x * 5 + 3] = up;
  out[threadIdx.x * 5 + 4] = static_cast<int>(ballot);
}

TEST(Simt, WarpShufflesExchangeAmongTheWarpsLanes) {
  std::vector<int> in(64);
  std::iota(in.begin(), in.end(), 0);
  std::vector<int> out(64 * 5);
  LAUNCH(warp_sums, dim3(1), dim3(64), 0, in.data(), out.data());
  for (int w = 0; w < 2; ++w) {
    int total = 0;
    for (int l = 0; l < 32; ++l) total += in[w * 32 + l];
    for (int l = 0; l < 32; ++l) {
      int t = w * 32 + l;
      EXPECT_EQ(out[t * 5 + 0], total);
      if (l == 0) {
        EXPECT_EQ(out[t * 5 + 1], total);
      }
      EXPECT_EQ(out[t * 5 + 2], w * 32);
      EXPECT_EQ(out[t * 5 + 3], l == 0 ? t : t - 1);
      EXPECT_EQ(static_cast<unsigned>(out[t * 5 + 4]), 0xaaaaaaaau);
    }
  }
}

__global__ void full_mask_shuffle(int* out) { out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1, 1); }

TEST(Simt, FullMaskShuffleInAPartialWarpIsReported) {
  std::vector<int> out(48);
  EXPECT_THROW(LAUNCH(full_mask_shuffle, dim3(1), dim3(48), 0, out.data()), KernelError);
}

__global__ void shuffle_after_exit(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

TEST(Simt, ShuffleWaitingForAnExitedLaneIsReportedNotHung) {
  std::vector<int> out(32);
  EXPECT_THROW(LAUNCH(shuffle_after_exit, dim3(1), dim3(32), 0, out.data()), KernelError);
}

__global__ void count_atomically(int* counter, float* fsum) {
  atomicAdd(counter, 1);
  atomicAdd(fsum, 0.5f);
  atomicMax(counter + 1, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

TEST(Simt, Atomics) {
  int counter[2] = {0, 0};
  float fsum = 0;
  LAUNCH(count_atomically, dim3(3), dim3(33), 0, counter, &fsum);
  EXPECT_EQ(counter[0], 99);
  EXPECT_EQ(counter[1], 98);
  EXPECT_EQ(fsum, 49.5f);
}

__global__ void nothing(int) {}

TEST(Simt, InvalidLaunchConfigurationsAreReported) {
  EXPECT_THROW(LAUNCH(nothing, dim3(1), dim3(1025), 0, 0), KernelError);
  EXPECT_THROW(LAUNCH(nothing, dim3(0), dim3(32), 0, 0), KernelError);
  EXPECT_THROW(LAUNCH(nothing, dim3(1), dim3(32), 64 * 1024, 0), KernelError);
}

__global__ void throws_in_kernel(int* out) {
  if (threadIdx.x == 7) throw std::runtime_error("boom");
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(Simt, AnExceptionInOneThreadUnwindsTheBlock) {
  std::vector<int> out(64);
  EXPECT_THROW(LAUNCH(throws_in_kernel, dim3(2), dim3(64), 0, out.data()), std::runtime_error);
  LAUNCH(record_indices, dim3(1), dim3(4), 0, reinterpret_cast<unsigned*>(out.data()));  // still usable
  EXPECT_EQ(out[3], 3);
}

// A thread that ran kernels gives its fiber stacks back to the system when it exits. A fiber's entry
// frames never return, so their stack poison stayed in AddressSanitizer's shadow of those addresses
// and memory mapped there later read as a stack overflow on its first write. Here 64 fibers' stacks
// are unmapped, then fresh mappings of the same size (which take those addresses) are written by
// memset, which ASan checks; in other builds this only shows the mappings are usable.
TEST(Simt, StacksGivenBackAtThreadExitCarryNoSanitizerPoison) {
  std::vector<float> in(128, 1.0f), sum(2);
  std::vector<int> out(64);
  std::thread([&] {
    LAUNCH(block_sum_static<true>, dim3(2), dim3(64), 0, in.data(), sum.data(), 128);
    EXPECT_THROW(LAUNCH(throws_in_kernel, dim3(1), dim3(64), 0, out.data()), std::runtime_error);
  }).join();
  EXPECT_EQ(sum[0] + sum[1], 128.0f);
  const size_t bytes = tandem::simt::kFiberStack + 4096;  // a stack and its guard page
  std::vector<void*> maps;
  for (int i = 0; i < 96; ++i) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    std::memset(p, 0x5a, bytes);
    maps.push_back(p);
  }
  for (void* p : maps) munmap(p, bytes);
}

}  // namespace
