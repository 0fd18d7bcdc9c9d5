// AVX2 + F16C conversions between f32 and the 16-bit floats behind convert_host, for CPUs without
// AVX-512 (convert_avx512.h): bit-identical to half.h's scalar conversions, NaN patterns included.
#pragma once
#include <cstdint>

#include "runtime/convert_loop.h"

namespace tandem {

// Converts n elements when (src, dst) is f32 <-> f16 or f32 <-> bf16, the CPU has AVX2 and F16C
// (runtime/backend/cpu_isa.h: checked once by cpuid) and TANDEM_CPU_ISA allows avx2; returns false,
// having done nothing, otherwise.
bool convert_avx2(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);
// The loops convert_avx2 runs, or null where it would return false for every pair.
const ConvertLoops* convert_avx2_loops();

}  // namespace tandem
