// AVX2 + F16C conversions between f32 and the 16-bit floats behind convert_host, for CPUs without
// AVX-512 (convert_avx512.h): bit-identical to half.h's scalar conversions, NaN patterns included.
#pragma once
#include <cstdint>

#include "runtime/convert_loop.h"

namespace tandem {

// The f32 <-> f16 and f32 <-> bf16 loops, where the CPU has AVX2 and F16C (runtime/backend/cpu_isa.h:
// checked once by cpuid) and TANDEM_CPU_ISA allows avx2; null otherwise.
const ConvertLoops* convert_avx2_loops();

}  // namespace tandem
