// AVX-512 conversions between f32 and the 16-bit floats behind convert_host (autocast casts, the CPU
// kernels' widening): bit-identical to half.h's scalar conversions, NaN patterns included.
#pragma once
#include <cstdint>

#include "runtime/convert_loop.h"

namespace tandem {

// The f32 <-> f16 and f32 <-> bf16 loops, where the CPU has AVX-512F/BW/VL (checked once by cpuid) and
// TANDEM_CPU_ISA allows it; null otherwise.
const ConvertLoops* convert_avx512_loops();

}  // namespace tandem
