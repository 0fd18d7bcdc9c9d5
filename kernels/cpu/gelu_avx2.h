// GELU's tanh form over f32 spans on AVX2 + FMA (CPUs without AVX-512, or TANDEM_CPU_ISA=avx2): the
// AVX-512 kernel's formula (gelu_avx512.h) with 8 lanes, the same bits.
#pragma once
#include <cstdint>

namespace tandem::kernels::avx2 {

// As avx512::gelu_tanh_f32: g == nullptr: out = gelu(x); else out = g * gelu'(x); n values, out may
// alias x or g. Needs cpu_isa_usable(CpuIsa::avx2).
void gelu_tanh_f32(const float* x, const float* g, float* out, int64_t n);

}  // namespace tandem::kernels::avx2
