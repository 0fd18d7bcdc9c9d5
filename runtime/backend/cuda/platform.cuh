// What every CUDA-backend source includes first: the CUDA runtime under nvcc, the SIMT emulator's
// stand-ins under g++ (DeviceKind::SIM); the one launch wrapper; dynamic shared memory; grid sizing.
// TANDEM_CUDA_NS names the namespace of everything built twice (tandem::cuda / tandem::sim), so the
// two builds of one source never collide when both libraries are loaded.
#pragma once
#ifdef TANDEM_SIMT_EMULATOR
#include "runtime/backend/cuda/simt/simt.h"
#define TANDEM_CUDA_NS sim
#else
#include <cuda_runtime.h>
#define TANDEM_CUDA_NS cuda
#endif
#include <cstdint>

#include "runtime/device.h"
#include "runtime/error.h"

namespace tandem::TANDEM_CUDA_NS {

#ifdef TANDEM_SIMT_EMULATOR
constexpr DeviceKind kKind = DeviceKind::SIM;
// Small grids under the emulator: grid-stride loops get exercised and tests stay fast.
constexpr int64_t kMaxGrid = 4;
#else
constexpr DeviceKind kKind = DeviceKind::CUDA;
constexpr int64_t kMaxGrid = 8192;
#endif
using Stream = cudaStream_t;

// Blocks for n items at `per_block` items per block, capped (kernels loop over the rest).
inline unsigned grid_for(int64_t n, int64_t per_block) {
  int64_t g = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > kMaxGrid ? kMaxGrid : g));
}

// The kernel's dynamic shared memory as T: a raw pointer on the GPU, a bounds- and race-checked
// view under the emulator. Index it; take no addresses of its elements.
#ifdef TANDEM_SIMT_EMULATOR
template <class T>
inline simt::SharedPtr<T> dynamic_shared() { return simt::dynamic_shared<T>(); }
#elif defined(__CUDACC__)
template <class T>
__device__ __forceinline__ T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char tandem_dynamic_smem[];
  return reinterpret_cast<T*>(tandem_dynamic_smem);
}
#endif

// Declares the block's static shared variable `name` of `type` (T, T[N], T[N][M]; a type with a
// comma needs an alias): `__shared__ type name` on the GPU, a bounds- and race-checked view of the
// block's shared memory under the emulator. Index it, assign it, read it; take no addresses.
#ifdef TANDEM_SIMT_EMULATOR
#define TANDEM_SHARED(type, name) SIMT_SHARED(type, name)
#elif defined(__CUDACC__)
template <class T>
using SharedType = T;  // lets an array type such as float[32][33] name a declaration's type
#define TANDEM_SHARED(type, name) __shared__ ::tandem::TANDEM_CUDA_NS::SharedType<type> name
#endif

// Runs kernel<<<grid, block, shared_bytes, stream>>>(args...) and checks the launch; under the
// emulator runs it to completion and turns an emulator report into a BackendError. (Host-only C++
// files of the CUDA build, such as runtime_cuda.cpp, see no launch.)
#ifdef TANDEM_SIMT_EMULATOR
void count_launch(const char* file, int line);  // kernels/cuda/runtime_sim.cpp: TANDEM_SIM_LAUNCHES
#endif

#if defined(TANDEM_SIMT_EMULATOR) || defined(__CUDACC__)
template <class... P, class... A>
void launch(const char* file, int line, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
            Stream stream, A&&... args) {
#ifdef TANDEM_SIMT_EMULATOR
  (void)stream;
  count_launch(file, line);
  try {
    simt::launch(file, line, kernel, grid, block, shared_bytes, std::forward<A>(args)...);
  } catch (const simt::KernelError& e) {
    throw_error(ErrorKind::Backend, file, line, e.what());
  }
#else
  kernel<<<grid, block, shared_bytes, stream>>>(static_cast<P>(std::forward<A>(args))...);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_call_error("kernel launch", file, line, cudaGetErrorString(err));
#endif
}
#endif

}  // namespace tandem::TANDEM_CUDA_NS

// TANDEM_LAUNCH(kernel, grid, block, shared_bytes, stream, args...): the only way op code launches.
#define TANDEM_LAUNCH(...) ::tandem::TANDEM_CUDA_NS::launch(__FILE__, __LINE__, __VA_ARGS__)
