// GELU's tanh form (GPT-2's) over f32 spans on AVX-512, forward and input gradient: gelu.h's
// gelu_tanh_f32 runs it where the CPU has AVX-512 (Eigen's vectorised tanh elsewhere).
#pragma once
#include <cstdint>

namespace tandem::kernels::avx512 {

// g == nullptr: out = gelu(x); else out = g * gelu'(x); n values, out may alias x or g. Needs
// has_f32().
void gelu_tanh_f32(const float* x, const float* g, float* out, int64_t n);

}  // namespace tandem::kernels::avx512
