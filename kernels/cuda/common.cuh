// Helpers shared by the CUDA-backend kernels: block size, grid-stride loops, packed (vectorised)
// loads, and the conversions between storage and accumulation types that the CPU backend also uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/backend.h"
#include "runtime/dtype.h"

namespace tandem::TANDEM_CUDA_NS {

constexpr int kBlock = 256;  // threads per block of the elementwise kernels (a multiple of 32)

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// N values of T loaded or stored as one aligned access (16 bytes for N * sizeof(T) == 16).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
// Elements of T in one 16-byte pack.
template <class T>
constexpr int kPackWidth = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
// Whether p is aligned to `bytes` (a pack's size), on the host and in kernels.
__host__ __device__ __forceinline__ bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}
__host__ __device__ __forceinline__ bool aligned16(const void* p) { return aligned_to(p, 16); }

// dst[0, n) = value, in 16-byte packs where dst is aligned to them (gradient buffers are zeroed
// every step: one store per element cost several times the bandwidth's time).
template <class T>
__global__ void fill_kernel(T* __restrict__ dst, int64_t n, T value) {
  constexpr int V = kPackWidth<T>;
  int64_t start = 0;
  if (V > 1 && aligned16(dst)) {
    Pack<T, V> p;
    for (int k = 0; k < V; ++k) p.v[k] = value;
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) reinterpret_cast<Pack<T, V>*>(dst)[i] = p;
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads()) dst[i] = value;
}

// The offset, through `stride`, of the element with row-major flat index i over dims `size` (the
// last dim fastest). 64-bit division per dim: fast_divmod.h has the variant below 2^31.
__device__ __forceinline__ int64_t offset_of(int64_t i, int rank, const int64_t* size, const int64_t* stride) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % size[d]) * stride[d];
    i /= size[d];
  }
  return off;
}

// Storage type -> accumulation type and back, rounding as the CPU backend does.
template <class T>
__host__ __device__ __forceinline__ acc_t<T> to_acc(T v) { return static_cast<acc_t<T>>(v); }
template <class T, class A>
__host__ __device__ __forceinline__ T from_acc(A v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}
// A host double converted the way the CPU backend converts scalars.
template <class T>
T scalar_as(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

}  // namespace tandem::TANDEM_CUDA_NS
