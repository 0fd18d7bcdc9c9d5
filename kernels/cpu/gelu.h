// GELU in its tanh form (GPT-2's), forward and input gradient, for the elementwise op and the GEMM
// epilogue: one formula for both, so a fused linear + GELU equals the two ops on the CPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/eigen.h"
#include "kernels/cpu/gelu_avx2.h"
#include "kernels/cpu/gelu_avx512.h"
#include "kernels/cpu/gemm_avx512.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

template <class X> constexpr X kSqrt2OverPi = X(0.79788456080286535588);
template <class X> constexpr X kGeluC = X(0.044715);

template <class X>
X gelu_tanh(X v) {
  return X(0.5) * v * (X(1) + std::tanh(kSqrt2OverPi<X> * (v + kGeluC<X> * v * v * v)));
}

template <class X>
X gelu_tanh_grad(X g, X v) {
  X t = std::tanh(kSqrt2OverPi<X> * (v + kGeluC<X> * v * v * v));
  X dinner = kSqrt2OverPi<X> * (X(1) + X(3) * kGeluC<X> * v * v);
  return g * (X(0.5) * (X(1) + t) + X(0.5) * v * (X(1) - t * t) * dinner);
}

// f32 spans through Eigen's vectorised tanh (the scalar tanhf, expm1f inside, took a quarter of a
// small GPT's training step), in L1-sized pieces: tanh's values live in a stack buffer, not in a
// heap array the size of the span (4 MB for a GPT MLP's activations: an mmap and its page faults at
// every call, and every pass over it out of cache). g == nullptr: out = gelu(x); else out = the input
// gradient for g. out may alias x. The path of CPUs without AVX-512.
inline void gelu_tanh_f32_eigen(const float* x, const float* g, float* out, int64_t n) {
  constexpr int64_t kPiece = 1024;
  const float c1 = kSqrt2OverPi<float>, c2 = kGeluC<float>;
  alignas(64) float tbuf[kPiece];
  for (int64_t lo = 0; lo < n; lo += kPiece) {
    const int64_t len = std::min(kPiece, n - lo);
    Eigen::Map<const Eigen::ArrayXf> v(x + lo, len);
    Eigen::Map<Eigen::ArrayXf> o(out + lo, len);
    Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> t(tbuf, len);
    t = (c1 * (v + c2 * v.cube())).tanh();
    if (!g) {
      o = 0.5f * v * (1.0f + t);
    } else {
      Eigen::Map<const Eigen::ArrayXf> gv(g + lo, len);
      o = gv * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t.square()) * (c1 * (1.0f + 3.0f * c2 * v.square())));
    }
  }
}

// GELU over f32 spans (as gelu_tanh_f32_eigen): on AVX-512 as x * sigmoid(2u) (gelu_avx512.cpp),
// 1.75x as fast forward and 1.45x backward on a Zen 4; the same formula and bits on AVX2 + FMA
// (gelu_avx2.cpp); through Eigen's tanh below AVX2. The elementwise op and the GEMM epilogue both
// come here, so a fused linear + GELU still equals the two ops on any one CPU.
inline void gelu_tanh_f32(const float* x, const float* g, float* out, int64_t n) {
  if (avx512::has_f32())
    avx512::gelu_tanh_f32(x, g, out, n);
  else if (cpu_isa_usable(CpuIsa::avx2))
    avx2::gelu_tanh_f32(x, g, out, n);
  else
    gelu_tanh_f32_eigen(x, g, out, n);
}

// gelu_tanh_f32 over any floating type (g, out as there; out may alias x or g): f32 as it is; f16
// and bf16 widened to f32 in L1-sized pieces and rounded once on store; f64 element by element. (The
// GEMM epilogue's; the elementwise op keeps the scalar formula for f16/bf16, which the CUDA
// kernels' results are held to bit for bit.)
template <class T>
void gelu_tanh_span(const T* x, const T* g, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    gelu_tanh_f32(x, g, out, n);
  } else if constexpr (std::is_same_v<acc_t<T>, float>) {
    constexpr int64_t kPiece = 1024;
    alignas(64) float xs[kPiece], gs[kPiece];
    for (int64_t lo = 0; lo < n; lo += kPiece) {
      const int64_t len = std::min(kPiece, n - lo);
      convert_host(x + lo, dtype_v<T>, xs, DType::f32, len);
      if (g) convert_host(g + lo, dtype_v<T>, gs, DType::f32, len);
      gelu_tanh_f32(xs, g ? gs : nullptr, xs, len);
      convert_host(xs, DType::f32, out + lo, dtype_v<T>, len);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = g ? T(gelu_tanh_grad(g[i], x[i])) : T(gelu_tanh(x[i]));
  }
}

}  // namespace tandem::kernels
