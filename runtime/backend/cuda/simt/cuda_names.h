// SIMT emulator: the CUDA names a kernel's source uses (the keywords, dim3, threadIdx, ...), defined for
// g++, and the emulator's error and limits. Part of simt.h.
#pragma once
#define TANDEM_SIMT_EMULATOR 1

#include <cstddef>
#include <stdexcept>

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

}  // namespace tandem::simt
