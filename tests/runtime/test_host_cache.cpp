// The CPU allocator's cache of large freed blocks: a freed block of 64 KiB or more comes back to the
// next allocation of its size, small ones are never kept, the limit bounds what is kept, alignment
// holds for every size, threads may allocate and free at once (TSan runs this test), and under
// AddressSanitizer a cached block stays poisoned so a use after free is still caught.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/host_cache.h"
#include "runtime/memory_budget.h"
#include "runtime/storage.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {

// Restores the limit a test changed, emptying the cache so each test starts from nothing.
struct CacheGuard {
  size_t saved = memory::host_cache_limit();
  CacheGuard() { memory::release_host_cache(); }
  ~CacheGuard() {
    memory::set_host_cache_limit(saved);
    memory::release_host_cache();
  }
};

const Device kCpu{DeviceKind::CPU, 0};

}  // namespace

TEST(HostCache, LargeBlockIsReusedAtTheSameSize) {
  CacheGuard guard;
  Allocator& a = host_allocator();
  const size_t n = size_t(1) << 20;
  void* p = a.allocate(n, kCpu);
  a.deallocate(p, kCpu);
  EXPECT_EQ(memory::host_cache_bytes(), n);
  void* q = a.allocate(n - 100, kCpu);  // rounds up to the same pages
  EXPECT_EQ(q, p);
  EXPECT_EQ(memory::host_cache_bytes(), 0u);
  void* r = a.allocate(n, kCpu);  // nothing cached any more: a new block
  EXPECT_NE(r, q);
  a.deallocate(q, kCpu);
  a.deallocate(r, kCpu);
  EXPECT_EQ(memory::host_cache_bytes(), 2 * n);
  memory::release_host_cache();
  EXPECT_EQ(memory::host_cache_bytes(), 0u);
}

TEST(HostCache, SmallBlocksAreNotKept) {
  CacheGuard guard;
  Allocator& a = host_allocator();
  void* p = a.allocate(1000, kCpu);
  a.deallocate(p, kCpu);
  EXPECT_EQ(memory::host_cache_bytes(), 0u);
}

TEST(HostCache, LimitBoundsWhatIsKeptAndZeroTurnsItOff) {
  CacheGuard guard;
  Allocator& a = host_allocator();
  const size_t n = size_t(256) << 10;
  memory::set_host_cache_limit(3 * n);
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(n, kCpu));
  for (void* p : blocks) a.deallocate(p, kCpu);
  EXPECT_EQ(memory::host_cache_bytes(), 3 * n);
  memory::set_host_cache_limit(n);  // lowering frees what no longer fits
  EXPECT_EQ(memory::host_cache_bytes(), n);
  memory::set_host_cache_limit(0);
  EXPECT_EQ(memory::host_cache_bytes(), 0u);
  void* p = a.allocate(n, kCpu);
  a.deallocate(p, kCpu);
  EXPECT_EQ(memory::host_cache_bytes(), 0u);
}

TEST(HostCache, EverySizeIsAlignedAndWritable) {
  CacheGuard guard;
  Allocator& a = host_allocator();
  for (size_t n : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65535), size_t(65536), size_t(65537),
                   size_t(1) << 22}) {
    for (int round = 0; round < 2; ++round) {  // the second round takes the cached blocks
      auto* p = static_cast<unsigned char*>(a.allocate(n, kCpu));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(i);
      for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(p[i], static_cast<unsigned char>(i)) << n;
      a.deallocate(p, kCpu);
    }
  }
}

TEST(HostCache, ImpossibleSizesAreOutOfMemoryNotAWrappedSmallBlock) {
  CacheGuard guard;
  // Only sizes the guard refuses: a merely huge one would reach malloc, which sanitizers abort on.
  for (size_t n : {SIZE_MAX, SIZE_MAX - 63, SIZE_MAX - 4096})
    EXPECT_THROW(host_allocator().allocate(n, kCpu), OutOfMemoryError) << n;
}

TEST(HostCache, TensorsReuseTheBlocksOfTheLastStep) {
  CacheGuard guard;
  const void* first;
  {
    Tensor t = Tensor::zeros({512, 512}, DType::f32, kCpu);
    first = t.data_ptr();
  }
  Tensor again = Tensor::zeros({512, 512}, DType::f32, kCpu);
  EXPECT_EQ(again.data_ptr(), first);
  for (float v : again.to_vector<float>()) ASSERT_EQ(v, 0.0f);  // zeros() writes its zeros into a reused block
}

TEST(HostCache, ThreadsAllocateAndFreeAtOnce) {
  CacheGuard guard;
  memory::set_host_cache_limit(size_t(8) << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      Allocator& a = host_allocator();
      for (int i = 0; i < 200; ++i) {
        const size_t n = (size_t(64) << 10) * size_t(1 + (i + t) % 3);
        auto* p = static_cast<unsigned char*>(a.allocate(n, kCpu));
        p[0] = p[n - 1] = static_cast<unsigned char>(t);
        EXPECT_EQ(p[0] + p[n - 1], 2 * t);
        a.deallocate(p, kCpu);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(memory::host_cache_bytes(), size_t(8) << 20);
}

#if defined(__SANITIZE_ADDRESS__)
TEST(HostCacheDeathTest, UseOfACachedBlockIsReported) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        CacheGuard guard;
        Allocator& a = host_allocator();
        auto* p = static_cast<volatile unsigned char*>(a.allocate(size_t(1) << 20, kCpu));
        a.deallocate(const_cast<unsigned char*>(p), kCpu);
        p[100] = 1;
      },
      "use-after-poison");
}
#endif
