// AVX-512 conversions between f32 and the 16-bit floats behind convert_host (autocast casts, the CPU
// kernels' widening): bit-identical to half.h's scalar conversions, NaN patterns included.
#pragma once
#include <cstdint>

#include "runtime/convert_loop.h"

namespace tandem {

// Converts n elements when (src, dst) is f32 <-> f16 or f32 <-> bf16, the CPU has AVX-512F/BW/VL
// (checked once by cpuid) and TANDEM_CPU_ISA allows it; returns false, having done nothing, otherwise.
bool convert_avx512(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);
// The loops convert_avx512 runs, or null where it would return false for every pair.
const ConvertLoops* convert_avx512_loops();

}  // namespace tandem
