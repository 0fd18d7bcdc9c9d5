// Our own AVX2+FMA GEMM of the CPU backend (f32 FMA micro-kernels over packed panels): gemm.cpp picks
// it at run time where the AVX-512 one is not usable (the CPU lacks AVX-512, or TANDEM_CPU_ISA=avx2),
// and keeps Eigen for f64 and CPUs without AVX2/FMA. f16/bf16 operands are widened as they are packed
// (gemm_widening), with f32 sums and an f32 C.
#pragma once

#include "runtime/backend/gemm.h"

namespace tandem::kernels::avx2 {

// AVX2, FMA and F16C, and TANDEM_CPU_ISA allows avx2 (runtime/backend/cpu_isa.h): cpuid, checked once.
bool has_f32();

// args.dtype f32 (bf16_products computes in f32: the products of bf16 values are exact there). Results
// do not depend on the thread count (K is never split between threads).
void gemm_f32(const GemmArgs& args);

// args.dtype f16 or bf16 for A and B, widened to f32 as the panels are packed (the values convert_host
// gives, so the products of gemm_f32 on widened copies, bit for bit); C is f32 (args.c a float
// matrix: the caller rounds it, or it is GemmArgs::wide_c's). No bf16_products or epilogue here.
void gemm_widening(const GemmArgs& args);

}  // namespace tandem::kernels::avx2
