// The CPU allocator and its cache of large freed blocks (runtime/host_cache.h). Every block carries
// its size in a 64-byte header in front of the memory a tensor sees, so a free knows where the block
// belongs without a lookup; under AddressSanitizer a cached block is poisoned, so a use after free
// is still reported.
#include "runtime/host_cache.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/env_settings.h"
#include "runtime/error.h"
#include "runtime/memory_budget.h"
#include "runtime/storage.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TANDEM_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TANDEM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TANDEM_POISON(p, n) ((void)(p), (void)(n))
#define TANDEM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tandem {
namespace {

constexpr size_t kAlignment = 64;  // a cache line, and the widest vector load (AVX-512)
constexpr size_t kHeader = 64;     // keeps the payload 64-byte aligned
constexpr size_t kMinCached = size_t(64) << 10;
constexpr size_t kPage = 4096;     // cached sizes are rounded to pages, so near sizes share blocks
constexpr size_t kDefaultLimit = size_t(1) << 30;

// The payload size a request gets: 64-byte lines below the cached sizes, whole pages from there.
size_t block_size(size_t nbytes) {
  size_t lines = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (lines == 0) lines = kAlignment;
  return lines < kMinCached ? lines : (lines + kPage - 1) / kPage * kPage;
}

size_t limit_from_environment() { return env::size("TANDEM_HOST_CACHE").value_or(kDefaultLimit); }

class BlockCache {
 public:
  BlockCache() : limit_(limit_from_environment()) {}

  // A cached block of exactly `size` payload bytes (its base, header included), or nullptr.
  char* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    char* base = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    TANDEM_UNPOISON(base + kHeader, size);
    return base;
  }

  // Keeps a freed block; false when it does not fit under the limit (the caller frees it).
  bool keep(char* base, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + size > limit_) return false;
    free_[size].push_back(base);
    cached_ += size;
    TANDEM_POISON(base + kHeader, size);
    return true;
  }

  size_t release_all() { return trim_to(0); }

  void set_limit(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = bytes;
    }
    trim_to(bytes);
  }
  size_t limit() {
    std::lock_guard<std::mutex> lock(mu_);
    return limit_;
  }
  size_t bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  // Frees cached blocks until at most `bytes` stay; returns the bytes freed.
  size_t trim_to(size_t bytes) {
    std::vector<char*> doomed;
    size_t freed = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [size, blocks] : free_) {
        while (cached_ > bytes && !blocks.empty()) {
          char* base = blocks.back();
          blocks.pop_back();
          TANDEM_UNPOISON(base + kHeader, size);
          doomed.push_back(base);
          cached_ -= size;
          freed += size;
        }
      }
    }
    for (char* base : doomed) std::free(base);
    return freed;
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<char*>> free_;  // by payload size
  size_t cached_ = 0;
  size_t limit_;
};

// Never destroyed: a tensor freed during static destruction still finds it.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes > SIZE_MAX - kHeader - kPage)  // the rounding below would wrap to a small block
      throw_out_of_memory(__FILE__, __LINE__, fmt::format("out of host memory allocating {} bytes", nbytes));
    const size_t size = block_size(nbytes);
    char* base = size >= kMinCached ? cache().take(size) : nullptr;
    if (base == nullptr) base = static_cast<char*>(std::aligned_alloc(kAlignment, kHeader + size));
    if (base == nullptr && cache().release_all() > 0)
      base = static_cast<char*>(std::aligned_alloc(kAlignment, kHeader + size));
    if (base == nullptr) throw_out_of_memory(__FILE__, __LINE__, fmt::format("out of host memory allocating {} bytes", nbytes));
    std::memcpy(base, &size, sizeof size);
    return base + kHeader;
  }

  void deallocate(void* ptr, Device) noexcept override {
    char* base = static_cast<char*>(ptr) - kHeader;
    size_t size;
    std::memcpy(&size, base, sizeof size);
    if (size >= kMinCached && cache().keep(base, size)) return;
    std::free(base);
  }
};

}  // namespace

Allocator& host_allocator() {
  static CpuAllocator a;
  return a;
}

namespace memory {
size_t host_cache_limit() { return cache().limit(); }
void set_host_cache_limit(size_t bytes) { cache().set_limit(bytes); }
size_t host_cache_bytes() { return cache().bytes(); }
void release_host_cache() { cache().release_all(); }
}  // namespace memory

}  // namespace tandem
