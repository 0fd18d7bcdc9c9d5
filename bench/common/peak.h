// The fp32 FMA peak of this machine's cores, measured with the widest vector ISA the compiler
// targets (-march=native: AVX-512, else AVX2+FMA, else SSE) and 12 independent accumulators.
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
  std::string isa;               // "avx512", "avx2", "sse"
  int vector_floats = 0;         // lanes per register
};

// Seconds of CPU time this process has used (all its threads).
double process_cpu_seconds();

// Runs the FMA kernel on `threads` OpenMP threads at once for about `seconds` in total and reports
// the median of `repeats` timings.
PeakResult measure_fp32_peak(int threads = 1, double seconds = 0.5, int repeats = 5);

}  // namespace tandem::bench
