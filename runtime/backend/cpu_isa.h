// The widest x86 vector extension that tandem's CPU kernels may use. Every kernel with an AVX-512
// path still checks the exact features it needs (cpuid, never the compiler's -march); this caps them
// all at once, so that a machine with AVX-512 can run, and CI can test, the paths a CPU without it
// takes (results there must stay independent of the thread count, as here).
#pragma once

namespace tandem {

enum class CpuIsa { generic = 0, avx2 = 1, avx512 = 2 };

// Whether the kernels may use `isa`: TANDEM_CPU_ISA caps it ("avx512", the default; "avx2": no
// AVX-512, AVX512-BF16 or AMX path anywhere; "generic": no path of our own above x86-64 either, the
// Eigen GEMM and the compiler's loops of a CPU without AVX2/FMA). Read once per process. Never throws
// (kernels ask from parallel regions): an unknown value caps nothing here, and is the two functions'
// error below. Says nothing of what the CPU has.
bool cpu_isa_allows(CpuIsa isa);

// Whether the kernels may run `isa` here: the CPU has it (cpuid; avx512: F/BW/VL/DQ, what the AVX-512
// kernels need; avx2: AVX2 + FMA) and TANDEM_CPU_ISA allows it. Checked once; never throws.
bool cpu_isa_usable(CpuIsa isa);

// The cap as its TANDEM_CPU_ISA spelling ("avx512", "avx2" or "generic"); an unknown value throws ValueError
// naming the variable and the values it takes.
const char* cpu_isa_cap();

// The widest usable ISA (cpu_isa_usable), for logs and benchmark records: "avx512", "avx2" or
// "generic" (neither).
// Throws as cpu_isa_cap: tandem-train and the C API's model creation call it before any kernel.
const char* cpu_isa_in_use();

}  // namespace tandem
