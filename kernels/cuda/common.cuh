// Helpers shared by the CUDA-backend kernels: block size, grid-stride loops, packed (vectorised)
// loads, and the conversions between storage and accumulation types that the CPU backend also uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/backend.h"
#include "runtime/dtype.h"

// A loop unrolled by nvcc, and by the host compiler under the emulator (which ignores nvcc's pragma).
#if defined(TANDEM_SIMT_EMULATOR)
#define TANDEM_UNROLL _Pragma("GCC unroll 16")
#else
#define TANDEM_UNROLL _Pragma("unroll")
#endif

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
// a + b rounded as an operation of its own, never fused with a product feeding it: an add into
// memory that must give the bits of a separate pass adding two stored tensors.
__device__ __forceinline__ float add_unfused(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_unfused(double a, double b) { return __dadd_rn(a, b); }
// A host double converted the way the CPU backend converts scalars.
template <class T>
T scalar_as(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// One element converted as the CPU backend converts it (convert_host: 16-bit floats through float).
template <class S, class D>
__device__ __forceinline__ D cast_one(S x) {
  if constexpr (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>) return D(static_cast<float>(x));
  else if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>) return static_cast<D>(static_cast<float>(x));
  else return static_cast<D>(x);
}

// Elements of a conversion S -> D a thread moves at once: the wider type's 16-byte pack (the f32 <->
// bf16 casts of a bf16 step move twice to four times the bytes of a one-element load).
template <class S, class D>
constexpr int kCastWidth = kPackWidth<S> < kPackWidth<D> ? kPackWidth<S> : kPackWidth<D>;

// dst[i] = cast_one(src[i]) for i < n, thread t of `threads` taking every threads-th item: packs of
// kCastWidth elements where `packed` (both pointers aligned to their packs), then the tail. The cast
// kernel (a grid over one tensor) and the multi-tensor one (a block per chunk) both run it.
template <class S, class D>
__device__ __forceinline__ void cast_elements(const S* __restrict__ src, D* __restrict__ dst, int64_t n, bool packed,
                                              int64_t t, int64_t threads) {
  constexpr int V = kCastWidth<S, D>;
  int64_t start = 0;
  if (V > 1 && packed) {
    const int64_t packs = n / V;
    for (int64_t i = t; i < packs; i += threads) {
      const Pack<S, V> in = reinterpret_cast<const Pack<S, V>*>(src)[i];
      Pack<D, V> out;
      for (int k = 0; k < V; ++k) out.v[k] = cast_one<S, D>(in.v[k]);
      reinterpret_cast<Pack<D, V>*>(dst)[i] = out;
    }
    start = packs * V;
  }
  for (int64_t i = start + t; i < n; i += threads) dst[i] = cast_one<S, D>(src[i]);
}

}  // namespace tandem::TANDEM_CUDA_NS
