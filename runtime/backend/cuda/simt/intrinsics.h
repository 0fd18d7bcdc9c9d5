// SIMT emulator: the device functions the kernels call that are plain host code here: fences,
// cached loads, fast math, and adds that the compiler may not contract. Part of simt.h.
#pragma once
#include <cmath>

// Blocks run one after another and a block's warps on one host thread: memory is already ordered
// and coherent, so a fence is nothing and an L2 load a plain one.
inline void __threadfence() {}
template <class T>
T __ldcg(const T* p) { return *p; }
template <class T>
T __ldg(const T* p) { return *p; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// Adds rounded as operations of their own, as the device's: never fused with a product feeding
// them. Out of line, so that the host compiler cannot contract across the call.
[[gnu::noinline]] inline float __fadd_rn(float a, float b) { return a + b; }
[[gnu::noinline]] inline double __dadd_rn(double a, double b) { return a + b; }
