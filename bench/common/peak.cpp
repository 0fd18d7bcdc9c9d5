// fp32 FMA peak kernel: 12 independent vector accumulators hide the FMA latency (4 cycles x 2
// ports needs at least 8 in flight). Built at -O3 so the accumulators stay in registers (-O2
// spilled them in our measurement).
#include "bench/common/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <vector>

namespace tandem::bench {

namespace {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr const char* kIsa = "avx512";
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr const char* kIsa = "avx2";
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
#else
using Vec = __m128;  // SSE has no FMA: a multiply and an add count as the same two flops
constexpr int kLanes = 4;
constexpr const char* kIsa = "sse";
inline Vec vset(float x) { return _mm_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline Vec vadd(Vec a, Vec b) { return _mm_add_ps(a, b); }
#endif

constexpr int kAccumulators = 12;
constexpr double kFlopsPerIter = 2.0 * kAccumulators * kLanes;

// iters x 12 independent FMAs; returns a value depending on every accumulator so the compiler
// keeps the work.
__attribute__((noinline)) float fma_kernel(long iters, float seed) {
  Vec acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = vset(seed + 0.001f * static_cast<float>(i));
  // x * a + b with a just below 1 stays bounded (it converges to b / (1 - a)).
  const Vec a = vset(0.999999f), b = vset(1e-6f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = vfma(acc[i], a, b);
  }
  Vec total = acc[0];
  for (int i = 1; i < kAccumulators; ++i) total = vadd(total, acc[i]);
  alignas(64) float lanes[kLanes];
  std::memcpy(lanes, &total, sizeof(total));
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

PeakResult measure_fp32_peak(int threads, double seconds, int repeats) {
  threads = std::max(1, threads);
  repeats = std::max(1, repeats);
  // Calibrate: iterations that take about seconds / repeats on one thread.
  long iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + fma_kernel(iters, 1.0f);
    double dt = seconds_since(t0);
    if (dt > 0.02 || iters > (1L << 40)) {
      iters = std::max(1L, static_cast<long>(static_cast<double>(iters) * (seconds / repeats) / dt));
      break;
    }
    iters *= 4;
  }
  std::vector<double> rates, cpu_rates;  // GFLOP/s of each repeat: per thread (wall), total (CPU time)
  for (int r = 0; r < repeats; ++r) {
    double c0 = process_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += fma_kernel(iters, 1.0f + static_cast<float>(omp_get_thread_num()));
    double dt = seconds_since(t0), dc = process_cpu_seconds() - c0;
    sink = sink + total;
    rates.push_back(kFlopsPerIter * static_cast<double>(iters) / dt / 1e9);
    cpu_rates.push_back(kFlopsPerIter * static_cast<double>(iters) * threads / dc / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  PeakResult out;
  out.gflops_per_thread = rates[rates.size() / 2];
  out.gflops = out.gflops_per_thread * threads;
  out.gflops_cpu_time = cpu_rates[cpu_rates.size() / 2];
  out.threads = threads;
  out.isa = kIsa;
  out.vector_floats = kLanes;
  return out;
}

}  // namespace tandem::bench
