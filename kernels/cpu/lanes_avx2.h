// lanes.h's f32 sums on AVX2 + FMA, for CPUs without AVX-512 (or TANDEM_CPU_ISA=avx2): the same 16
// lanes (lane l adds the elements i = l mod 16), held in two ymm registers, the lanes added 0..15
// and the tail in order after them. lanes.h's 64-byte vectors are one zmm register on AVX-512; built
// for AVX2, GCC splits them through the stack (the cnn's batch-norm statistics ran at ~5 cycles a
// value), so lanes.h calls these instead where lanes_usable().
#pragma once
#include <cstdint>

namespace tandem::kernels::avx2 {

// AVX2 and FMA usable (cpuid and TANDEM_CPU_ISA) and AVX-512 not: read once.
bool lanes_usable();

// sum p[i]
float sum_f32(const float* p, int64_t n);
// sum p[i] of 16-bit values (f16 when f16, else bf16), widened as they are read: sum_f32's lanes and
// order, so the bits of sum_f32 over a widened copy (and of lanes.h's sum_of on AVX-512, which adds in
// the same order). Needs AVX2 and F16C (cpu_isa_usable(CpuIsa::avx2)), AVX-512 or not.
float sum_16bit(const uint16_t* p, int64_t n, bool f16);
// sum (p[i] - mu)^2
float sum_sq_dev_f32(const float* p, int64_t n, float mu);
// a = sum dy[i], b = sum dy[i] (x[i] - m)
void sum_dy_dyxmu_f32(const float* dy, const float* x, int64_t n, float m, float& a, float& b);
// a = sum g, b = sum g (x[i] - mu) r with g = dy[i] w[i] (LayerNorm's backward)
void sum_g_gxhat_f32(const float* dy, const float* w, const float* x, int64_t n, float mu, float r, float& a,
                     float& b);
// dw[k] += sum_q dy[q] cols[k * ld + q] for k < K (K <= 16), and *db += sum_q dy[q] when db: the
// convolution's weight gradient at tiny K (conv.cpp's small_k_dots), each k over the same lanes.
void small_k_dots_f32(const float* dy, const float* cols, int64_t ld, int64_t L, int64_t K, float* dw, float* db);
// small_k_dots_f32 of 16-bit dy and cols (f16 when f16, else bf16), widened as they are read: the sums
// of small_k_dots_f32 over widened copies, bit for bit. Needs AVX2 and F16C, AVX-512 or not.
void small_k_dots_16bit(const uint16_t* dy, const uint16_t* cols, int64_t ld, int64_t L, int64_t K, float* dw,
                        float* db, bool f16);

}  // namespace tandem::kernels::avx2
