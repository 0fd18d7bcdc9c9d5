// Our own AVX2+FMA GEMM of the CPU backend (f32 FMA micro-kernels over packed panels): gemm.cpp picks
// it at run time where the AVX-512 one is not usable (the CPU lacks AVX-512, or TANDEM_CPU_ISA=avx2),
// and keeps Eigen for f64 and CPUs without AVX2/FMA. f16/bf16 operands reach it widened to f32.
#pragma once

#include "runtime/backend/gemm.h"

namespace tandem::kernels::avx2 {

// AVX2, FMA and F16C, and TANDEM_CPU_ISA allows avx2 (runtime/backend/cpu_isa.h): cpuid, checked once.
bool has_f32();

// args.dtype f32 (bf16_products computes in f32: the products of bf16 values are exact there). Results
// do not depend on the thread count (K is never split between threads).
void gemm_f32(const GemmArgs& args);

}  // namespace tandem::kernels::avx2
