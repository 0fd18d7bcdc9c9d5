// TANDEM_HD marks math that compiles for host and device (nvcc) and under the SIMT emulator (g++).
#pragma once
#if defined(__CUDACC__) || defined(TANDEM_SIMT_EMULATOR)
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif

// TANDEM_HD_INLINE: per-element math that a loop calls, inlined wherever the loop is (left to
// itself, g++ may call it out of line from a large loop body, which then cannot be vectorised).
#if defined(__CUDACC__)
#define TANDEM_HD_INLINE TANDEM_HD __forceinline__
#elif defined(__GNUC__)
#define TANDEM_HD_INLINE TANDEM_HD inline __attribute__((always_inline))
#else
#define TANDEM_HD_INLINE TANDEM_HD inline
#endif
