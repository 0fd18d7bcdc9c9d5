// Host side of DeviceKind::SIM: the CUDA backend's host code runs with host memory standing in for
// device memory; every "stream" is synchronous because emulated launches run to completion.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/backend.h"
#include "runtime/env_settings.h"
#include "runtime/memory_budget.h"
#include "runtime/storage.h"

namespace tandem::sim {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's alignment, so vectorised loads see the same

class SimAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override { return device_alloc(nbytes, device); }
  void deallocate(void* ptr, Device device) noexcept override { device_free(ptr, device); }
};

SimAllocator g_allocator;
const bool g_registered = (register_allocator(DeviceKind::SIM, &g_allocator), true);

}  // namespace

Stream stream_for(Device) { return nullptr; }

void* device_alloc(size_t nbytes, Device device) {
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr)
    throw_out_of_memory(__FILE__, __LINE__,
                        fmt::format("out of host memory allocating {} bytes for {}", nbytes, device.str()));
  return p;
}

void device_free(void* ptr, Device) noexcept { std::free(ptr); }

namespace {

// TANDEM_SIM_LAUNCHES=FILE: every emulated launch counted by its call site, and every place where a
// GPU's host would wait for the device (a copy to the host, a synchronisation) under a name starting
// "host-wait:", written to FILE at exit ("count site" a line, the most first): what a step launches
// and waits for, and from where, on a machine without a GPU (scripts/sim-launches).
void count_site(const std::string& site) {
  static const std::optional<std::string> file = env::text("TANDEM_SIM_LAUNCHES");
  if (!file) return;
  static const char* const path = file->c_str();
  static std::mutex mutex;
  static std::map<std::string, long>* const counts = [] {
    auto* c = new std::map<std::string, long>;  // never freed: read by the exit handler
    std::atexit([] {
      std::lock_guard<std::mutex> lock(mutex);
      std::vector<std::pair<long, std::string>> rows;
      for (const auto& [site, n] : *counts) rows.emplace_back(n, site);
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      if (FILE* f = std::fopen(path, "w")) {
        for (const auto& [n, site] : rows) std::fprintf(f, "%ld %s\n", n, site.c_str());
        std::fclose(f);
      }
    });
    return c;
  }();
  std::lock_guard<std::mutex> lock(mutex);
  ++(*counts)[site];
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  TANDEM_CHECK(dst_device.is_host_addressable() && src_device.is_host_addressable(),
               "sim copy: {} -> {} is not supported (sim copies to and from the CPU and sim devices)",
               src_device.str(), dst_device.str());
  // On a GPU a copy to the host waits for everything queued before it; one from the host does not
  // (the staging ring, runtime_cuda.cpp).
  if (nbytes > 0 && src_device.kind == DeviceKind::SIM && dst_device.is_cpu()) count_site("host-wait:copy-to-host");
  if (nbytes > 0 && dst != src) std::memmove(dst, src, nbytes);
}

void count_launch(const char* file, int line) { count_site(fmt::format("{}:{}", file, line)); }

void synchronize(Device) { count_site("host-wait:synchronize"); }

void profiler_start() {}
void profiler_stop() {}

Event::Event(Device device) : device_(device) {}
Event::~Event() = default;
void Event::record() {}
void Event::wait(Device) {}
void Event::synchronize() { count_site("host-wait:event"); }
bool Event::ready() { return true; }

}  // namespace tandem::sim
