// The fp32 FMA peak of this machine's cores, measured with the widest vector ISA the CPU kernels may
// use (runtime/backend/cpu_isa.h: AVX-512, else AVX2+FMA, as cpuid and TANDEM_CPU_ISA allow; else the
// compiler's target) and 12 independent accumulators; and the peak of the bf16 products the CPU GEMM
// uses.
#pragma once
#include <string>

namespace tandem::bench {

struct PeakResult {
  double gflops_per_thread = 0;  // median over repeats, per thread (wall-clock time)
  double gflops = 0;             // all threads together (wall-clock time)
  // The same from the process's CPU time: insensitive to other processes time-sharing the cores
  // (a shared machine), so it pairs with a CPU-time figure of the workload being compared.
  double gflops_cpu_time = 0;
  int threads = 1;
  std::string isa;               // fp32: "avx512", "avx2", "sse"; bf16: "amx-bf16", "avx512-bf16" (peak_isa)
  int vector_floats = 0;         // lanes per register
};

// Seconds of CPU time this process has used (all its threads).
double process_cpu_seconds();

// Runs the FMA kernel on `threads` OpenMP threads at once for about `seconds` in total and reports
// the median of `repeats` timings.
PeakResult measure_fp32_peak(int threads = 1, double seconds = 0.5, int repeats = 5);

// The peak of the arithmetic the CPU GEMM multiplies bf16 with here (kernels::cpu_bf16_gemm_path):
// AMX tile products (isa "amx-bf16"), vdpbf16ps ("avx512-bf16"), or the fp32 FMA peak where bf16 is
// widened. vector_floats is 0 for the first two.
PeakResult measure_bf16_peak(int threads = 1, double seconds = 0.5, int repeats = 5);

// The kernel the CPU GEMM multiplies with under `amp` (off, f16, bf16), for benchmark records
// (gemm_isa): "amx-bf16" or "avx512-bf16" (bf16 products), else that of the f32 products ("avx512",
// "avx2": our kernels; "eigen"), which f16 operands, and bf16 ones without AVX512-BF16, are widened for.
std::string gemm_isa(const std::string& amp);

}  // namespace tandem::bench
