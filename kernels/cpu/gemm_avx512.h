// Our own AVX-512 GEMM of the CPU backend (f32 FMA and bf16 dot-product micro-kernels over packed
// panels); gemm.cpp picks it at run time and keeps Eigen for f64, f16 and CPUs without AVX-512.
#pragma once

#include "runtime/backend/gemm.h"

namespace tandem::kernels::avx512 {

// What this CPU can run and TANDEM_CPU_ISA allows (runtime/backend/cpu_isa.h), checked once (cpuid),
// never assumed from the compiler's -march.
bool has_f32();   // AVX-512F/BW/VL/DQ
bool has_bf16();  // the above plus AVX512-BF16 (vdpbf16ps)
bool has_amx();   // the above plus AMX-TILE and AMX-BF16, and Linux lets this process use the tiles

// args.dtype f32: f32 FMA kernel; bf16_products (f32 operands whose values are bf16) or dtype bf16:
// bf16 pairs multiplied by vdpbf16ps, accumulated in f32 (denormal operands count as zero), output
// rounded once (to bf16 for dtype bf16 unless wide_c). Results do not depend on the thread count (K
// is never split between threads).
void gemm_f32(const GemmArgs& args);
void gemm_bf16(const GemmArgs& args);
// f16 operands into an f32 C (dtype f16, wide_c) on the f32 FMA kernel, widened as they are packed
// (vcvtph2ps): gemm_f32's sums of the widened values, bit for bit, without widened copies.
void gemm_f16_wide(const GemmArgs& args);
// As gemm_bf16, on AMX tiles (tdpbf16ps: the same pairs, the same f32 sums of each pair's products).
void gemm_bf16_amx(const GemmArgs& args);

}  // namespace tandem::kernels::avx512

namespace tandem::kernels {

// The arithmetic of the CPU GEMM's bf16 products now (TANDEM_CPU_GEMM included): "amx-bf16" (tiles),
// "avx512-bf16" (vdpbf16ps) or "fp32" (widened to f32: our FMA kernel or Eigen). Benchmarks measure
// the peak of the one in use.
const char* cpu_bf16_gemm_path();
// Whether f32 products run on our AVX-512 kernels (the CPU has them and TANDEM_CPU_GEMM is not eigen).
bool cpu_f32_gemm_ours();
// The kernel of the f32 products now, for benchmark records (gemm_isa): "avx512", "avx2" (our
// kernels) or "eigen".
const char* cpu_f32_gemm_isa();
// Whether the CPU GEMM reads `dtype` (f16 or bf16) operands as they lie into an f32 C (wide_c), with
// no widened copies: the AVX2 kernel and, for f16, the AVX-512 f32 kernel (which widen them as they
// pack them), or bf16 pairs (amx-bf16, avx512-bf16). Else a 16-bit GEMM widens whole copies of its
// operands first, which a caller holding f32 values already should not make it do. True only where
// AVX2 and F16C are usable (cpu_isa_usable(CpuIsa::avx2)).
bool cpu_gemm_reads_16bit(DType dtype);

}  // namespace tandem::kernels
