// fp32 FMA peak kernel: 12 independent vector accumulators hide the FMA latency (4 cycles x 2
// ports needs at least 8 in flight). Built at -O3 so the accumulators stay in registers (-O2
// spilled them in our measurement). The bf16 peaks: the instruction the CPU GEMM multiplies bf16
// with (kernels::cpu_bf16_gemm_path), AMX tile products or vdpbf16ps, on independent accumulators.
#include "bench/common/peak.h"

#include <cstdint>
#include <string>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/gemm_avx512.h"
#include "runtime/backend/cpu_isa.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <vector>

namespace tandem::bench {

namespace {

// The fp32 kernel of each ISA, compiled for it by a target attribute and chosen at run time as the CPU
// kernels choose theirs (runtime/backend/cpu_isa.h: cpuid and TANDEM_CPU_ISA), so that the peak is the
// one of the path that ran. Below AVX2 (TANDEM_CPU_ISA=generic, or a CPU without it) the compiler's
// target, what Eigen and the generic loops are built for.
#define TANDEM_PEAK_FMA_KERNEL(NAME, VEC, LANES, SET, FMA, ADD)                                    \
  __attribute__((noinline)) float NAME(long iters, float seed) {                                  \
    VEC acc[kAccumulators];                                                                     \
    for (int i = 0; i < kAccumulators; ++i) acc[i] = SET(seed + 0.001f * static_cast<float>(i)); \
    /* x * a + b with a just below 1 stays bounded (it converges to b / (1 - a)). */            \
    const VEC a = SET(0.999999f), b = SET(1e-6f);                                               \
    for (long it = 0; it < iters; ++it) {                                                       \
      _Pragma("GCC unroll 12") for (int i = 0; i < kAccumulators; ++i) acc[i] = FMA(acc[i], a, b); \
    }                                                                                           \
    VEC total = acc[0];                                                                         \
    for (int i = 1; i < kAccumulators; ++i) total = ADD(total, acc[i]);                         \
    alignas(64) float lanes[LANES];                                                             \
    std::memcpy(lanes, &total, sizeof(total));                                                  \
    float s = 0;                                                                                \
    for (float x : lanes) s += x;                                                               \
    return s;                                                                                   \
  }

constexpr int kAccumulators = 12;

// iters x 12 independent FMAs; each returns a value depending on every accumulator so the compiler
// keeps the work.
__attribute__((target("avx512f"))) TANDEM_PEAK_FMA_KERNEL(fma_kernel_avx512, __m512, 16, _mm512_set1_ps,
                                                          _mm512_fmadd_ps, _mm512_add_ps)
__attribute__((target("avx2,fma"))) TANDEM_PEAK_FMA_KERNEL(fma_kernel_avx2, __m256, 8, _mm256_set1_ps,
                                                           _mm256_fmadd_ps, _mm256_add_ps)

#if defined(__AVX512F__)
constexpr const char* kCompilerIsa = "avx512";
constexpr int kCompilerLanes = 16;
#define fma_kernel_compiler fma_kernel_avx512
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kCompilerIsa = "avx2";
constexpr int kCompilerLanes = 8;
#define fma_kernel_compiler fma_kernel_avx2
#else
constexpr const char* kCompilerIsa = "sse";
constexpr int kCompilerLanes = 4;
inline __m128 sse_fma(__m128 a, __m128 b, __m128 c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
// SSE has no FMA: a multiply and an add count as the same two flops.
TANDEM_PEAK_FMA_KERNEL(fma_kernel_compiler, __m128, 4, _mm_set1_ps, sse_fma, _mm_add_ps)
#endif

#define TANDEM_PEAK_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// 12 vdpbf16ps chains: 16 lanes x 2 products x 2 flops each.
constexpr double kDpbf16FlopsPerIter = 12 * 16 * 2 * 2.0;
TANDEM_PEAK_BF16 __attribute__((noinline)) float dpbf16_kernel(long iters, float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  }
  __m512 total = acc[0];
  for (int i = 1; i < 12; ++i) total = _mm512_add_ps(total, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

// 6 tile chains (tdpbf16ps issues every 16 cycles on Sapphire Rapids and takes several times that):
// 16 x 16 outputs x 32 products x 2 flops each.
constexpr double kAmxFlopsPerIter = 6 * 16 * 16 * 32 * 2.0;
TANDEM_AMX __attribute__((noinline)) float amx_kernel(long iters, float seed) {
  alignas(64) uint16_t ab[16 * 32];
  alignas(64) float c[16 * 16];
  for (uint16_t& v : ab) v = 0x3a83;  // bf16 ~1e-3
  for (float& v : c) v = seed;
  kernels::amx_begin();
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  _tile_loadd(0, c, 64);
  _tile_loadd(1, c, 64);
  _tile_loadd(2, c, 64);
  _tile_loadd(3, c, 64);
  _tile_loadd(4, c, 64);
  _tile_loadd(5, c, 64);
  for (long it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  float s = 0;
  _tile_stored(0, c, 64);
  s += c[0];
  _tile_stored(5, c, 64);
  s += c[0];
  kernels::amx_end();
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

namespace {

// Runs kernel(iters, seed) on `threads` OpenMP threads at once for about `seconds` in total and
// reports the median of `repeats` timings.
template <class Kernel>
PeakResult measure(Kernel kernel, double flops_per_iter, int threads, double seconds, int repeats) {
  threads = std::max(1, threads);
  repeats = std::max(1, repeats);
  // Calibrate: iterations that take about seconds / repeats on one thread.
  long iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + kernel(iters, 1.0f);
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
    total += kernel(iters, 1.0f + static_cast<float>(omp_get_thread_num()));
    double dt = seconds_since(t0), dc = process_cpu_seconds() - c0;
    sink = sink + total;
    rates.push_back(flops_per_iter * static_cast<double>(iters) / dt / 1e9);
    cpu_rates.push_back(flops_per_iter * static_cast<double>(iters) * threads / dc / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  PeakResult out;
  out.gflops_per_thread = rates[rates.size() / 2];
  out.gflops = out.gflops_per_thread * threads;
  out.gflops_cpu_time = cpu_rates[cpu_rates.size() / 2];
  out.threads = threads;
  return out;
}

}  // namespace

PeakResult measure_fp32_peak(int threads, double seconds, int repeats) {
  float (*kernel)(long, float) = fma_kernel_compiler;
  const char* isa = kCompilerIsa;
  int lanes = kCompilerLanes;
  if (cpu_isa_usable(CpuIsa::avx512)) kernel = fma_kernel_avx512, isa = "avx512", lanes = 16;
  else if (cpu_isa_usable(CpuIsa::avx2)) kernel = fma_kernel_avx2, isa = "avx2", lanes = 8;
  PeakResult out = measure(kernel, 2.0 * kAccumulators * lanes, threads, seconds, repeats);
  out.isa = isa;
  out.vector_floats = lanes;
  return out;
}

std::string gemm_isa(const std::string& amp) {
  const std::string bf16 = kernels::cpu_bf16_gemm_path();
  return amp == "bf16" && bf16 != "fp32" ? bf16 : kernels::cpu_f32_gemm_isa();
}

PeakResult measure_bf16_peak(int threads, double seconds, int repeats) {
  const std::string path = kernels::cpu_bf16_gemm_path();
  if (path == "fp32") return measure_fp32_peak(threads, seconds, repeats);
  PeakResult out = path == "amx-bf16" ? measure(amx_kernel, kAmxFlopsPerIter, threads, seconds, repeats)
                                      : measure(dpbf16_kernel, kDpbf16FlopsPerIter, threads, seconds, repeats);
  out.isa = path;
  out.vector_floats = 0;
  return out;
}

}  // namespace tandem::bench
