// Host side of DeviceKind::CUDA: device discovery, one non-blocking stream and a stream-ordered
// memory pool per device, pinned staging for host->device copies, events, the CUDA allocator.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/backend.h"
#include "runtime/backend/cuda/check.h"
#include "runtime/device_query.h"
#include "runtime/memory_budget.h"
#include "runtime/storage.h"

namespace tandem::cuda {
namespace {

// Pinned host->device staging per device: a ring of slots, each with the event recorded after the
// last copy out of it. A copy waits only for the copy that used its slot kStagingSlots copies ago,
// not for the one just before it: with a single buffer, two small copies in a step (the embedding
// backwards' plans) made the host wait for all the work queued before the first.
constexpr int kStagingSlots = 8;
constexpr size_t kStagingSlotBytes = size_t(2) << 20;

struct DeviceState {
  cudaStream_t stream = nullptr;
  char* staging = nullptr;  // pinned, kStagingSlots * kStagingSlotBytes
  cudaEvent_t slot_free[kStagingSlots] = {};
  int next_slot = 0;
  std::mutex staging_mutex;
};

struct Discovery {
  int count = 0;
  std::string why;
};

// Why cudaGetDeviceCount found nothing, in words for the log. A machine without a GPU has no
// driver, which the runtime reports as "CUDA driver version is insufficient for CUDA runtime
// version", a driver fault to the reader: cudaDriverGetVersion tells the two apart (0: no driver).
std::string no_device_reason(cudaError_t err) {
  int driver = 0, runtime = 0;
  if (err == cudaErrorInsufficientDriver) {
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "this machine has no NVIDIA driver";
    cudaRuntimeGetVersion(&runtime);
    return "the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) +
           ", older than this build's CUDA " + std::to_string(runtime / 1000) + "." +
           std::to_string(runtime % 1000 / 10) + " (update the driver)";
  }
  if (err == cudaErrorNoDevice) return "the driver reports no device";
  return cudaGetErrorString(err);
}

const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery out;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      out.why = no_device_reason(err);
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
      return out;
    }
    out.count = n;
    if (n == 0) out.why = "the driver reports no device";
    return out;
  }();
  return d;
}

std::vector<std::unique_ptr<DeviceState>>& states() {
  static std::vector<std::unique_ptr<DeviceState>> s = [] {
    std::vector<std::unique_ptr<DeviceState>> v;
    for (int i = 0; i < discovery().count; ++i) v.push_back(std::make_unique<DeviceState>());
    return v;
  }();
  return s;
}

std::once_flag& init_flag(int index) {
  static std::vector<std::once_flag> flags(static_cast<size_t>(std::max(discovery().count, 1)));
  return flags[static_cast<size_t>(index)];
}

DeviceState& state(Device device) {
  TANDEM_CHECK(device.kind == DeviceKind::CUDA, "expected a CUDA device, got {}", device.str());
  TANDEM_CHECK_KIND(NotSupported, device.index >= 0 && device.index < discovery().count,
                    "device {} does not exist: {}", device.str(), describe());
  DeviceState& s = *states()[static_cast<size_t>(device.index)];
  std::call_once(init_flag(device.index), [&] {
    CUDA_CHECK(cudaSetDevice(device.index));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    // Keep freed blocks in the pool instead of returning them to the driver at every sync.
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device.index));
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    void* staging = nullptr;
    CUDA_CHECK(cudaMallocHost(&staging, kStagingSlots * kStagingSlotBytes));
    s.staging = static_cast<char*>(staging);
    for (cudaEvent_t& e : s.slot_free) {
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventRecord(e, s.stream));
    }
  });
  CUDA_CHECK(cudaSetDevice(device.index));
  return s;
}

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override { return device_alloc(nbytes, device); }
  void deallocate(void* ptr, Device device) noexcept override { device_free(ptr, device); }
};
CudaAllocator g_allocator;
const bool g_registered = (register_allocator(DeviceKind::CUDA, &g_allocator), true);

}  // namespace

int device_count() { return discovery().count; }
bool available() { return device_count() > 0; }

std::string describe() {
  const Discovery& d = discovery();
  if (d.count == 0) return "no CUDA device: " + d.why;
  std::string out = std::to_string(d.count) + " CUDA device" + (d.count > 1 ? "s" : "") + " (";
  for (int i = 0; i < d.count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) out += (i ? ", " : "") + std::string(prop.name);
  }
  return out + ")";
}

Device default_device(bool insist) {
  if (available()) return Device(DeviceKind::CUDA, 0);
  if (insist) TANDEM_FAIL(NotSupported, "{}; run on the CPU (device cpu) instead", describe());
  return kCPU;
}

DeviceInfo device_info(int index) {
  TANDEM_CHECK_KIND(NotSupported, index >= 0 && index < device_count(), "cuda:{} does not exist: {}", index,
                    describe());
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  CUDA_CHECK(cudaSetDevice(index));
  const cudaError_t err = cudaMemGetInfo(&info.memory_free, &info.memory_total);
  CUDA_CHECK(cudaSetDevice(current));
  CUDA_CHECK(err);
  return info;
}

Stream stream_for(Device device) { return state(device).stream; }
void* native_stream(Device device) { return stream_for(device); }

int pointer_device(const void* p) {
  if (p == nullptr || device_count() == 0) return -1;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // not memory CUDA knows: host memory
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

void* device_alloc(size_t nbytes, Device device) {
  DeviceState& s = state(device);
  if (nbytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, nbytes, s.stream);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the device is fine, only full; a training loop may recover
    throw_out_of_memory(__FILE__, __LINE__,
                        fmt::format("cudaMallocAsync(&p, {}, stream) failed: {} (on {})", nbytes,
                                    cudaGetErrorString(err), device.str()));
  }
  CUDA_CHECK(err);
  return p;
}

void device_free(void* ptr, Device device) noexcept {
  if (!ptr) return;
  try {
    cudaError_t err = cudaFreeAsync(ptr, state(device).stream);
    if (err != cudaSuccess)
      std::fprintf(stderr, "tandem: cudaFreeAsync on %s failed: %s\n", device.str().c_str(), cudaGetErrorString(err));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: freeing device memory: %s\n", e.what());
  }
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  const bool dst_host = dst_device.kind == DeviceKind::CPU, src_host = src_device.kind == DeviceKind::CPU;
  TANDEM_CHECK((dst_host || dst_device.kind == DeviceKind::CUDA) && (src_host || src_device.kind == DeviceKind::CUDA),
               "cuda copy: {} -> {} is not supported", src_device.str(), dst_device.str());
  if (dst_host && src_host) {
    std::memmove(dst, src, nbytes);
  } else if (src_host) {
    // host -> device through the pinned staging slots in turn, a slot's worth at a time, ordered on
    // the stream (a large copy fills one slot while the DMA drains the ones before it).
    DeviceState& s = state(dst_device);
    std::lock_guard<std::mutex> lock(s.staging_mutex);
    for (size_t done = 0; done < nbytes; done += kStagingSlotBytes) {
      const size_t n = std::min(kStagingSlotBytes, nbytes - done);
      const int slot = s.next_slot;
      s.next_slot = (slot + 1) % kStagingSlots;
      char* buffer = s.staging + static_cast<size_t>(slot) * kStagingSlotBytes;
      CUDA_CHECK(cudaEventSynchronize(s.slot_free[slot]));
      std::memcpy(buffer, static_cast<const char*>(src) + done, n);
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, buffer, n, cudaMemcpyHostToDevice, s.stream));
      CUDA_CHECK(cudaEventRecord(s.slot_free[slot], s.stream));
    }
  } else if (dst_host) {
    cudaStream_t stream = state(src_device).stream;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  } else if (src_device == dst_device) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, state(dst_device).stream));
  } else {
    // Across devices: the destination's stream waits for the source's queued work first, and the
    // source's stream for the copy after it, so that the source's stream-ordered allocator cannot
    // hand the memory out again (the tensor freed right after the copy) before the copy has read it.
    Event ready(src_device);
    ready.record();
    ready.wait(dst_device);
    CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes,
                                          state(dst_device).stream));
    Event copied(dst_device);
    copied.record();
    copied.wait(src_device);
  }
}

void synchronize(Device device) { CUDA_CHECK(cudaStreamSynchronize(state(device).stream)); }
void profiler_start() { CUDA_CHECK(cudaProfilerStart()); }
void profiler_stop() { CUDA_CHECK(cudaProfilerStop()); }

Event::Event(Device device) : device_(device) {
  state(device);
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
}
Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void Event::record() { CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream_for(device_))); }
void Event::wait(Device other) {
  CUDA_CHECK(cudaStreamWaitEvent(stream_for(other), static_cast<cudaEvent_t>(event_), 0));
}
void Event::synchronize() { CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_))); }
bool Event::ready() {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) return false;
  CUDA_CHECK(err);
  return true;
}

}  // namespace tandem::cuda
