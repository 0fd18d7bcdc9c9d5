// CPU GEMM: f32 and bf16 on our AVX-512 kernels (gemm_avx512.cpp) where the CPU has them, bf16 on
// AMX tiles where it has those; f32 on our AVX2+FMA kernel (gemm_avx2.cpp) where it has no AVX-512
// (f16, and bf16 without AVX512-BF16, widened to f32 for it); otherwise, and for f64, Eigen: row-major maps over the caller's
// memory, transposes folded into Eigen's product (no copies for f32/f64), C cut into tiles that
// depend on the sizes only (gemm_tiles.h: the bits do not depend on the thread count); f16 (and bf16
// without AVX512-BF16) widened to f32 once, multiplied, and rounded on store. TANDEM_CPU_GEMM=eigen
// forces Eigen everywhere, TANDEM_CPU_GEMM=avx512 our AVX-512 kernels without AMX (A/B measurements,
// tests); TANDEM_CPU_ISA=avx2 (runtime/backend/cpu_isa.h) takes the path of a CPU without AVX-512,
// TANDEM_CPU_ISA=generic that of a CPU without AVX2/FMA.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "kernels/cpu/eigen.h"
#include "kernels/cpu/gemm_epilogue.h"
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_tiles.h"
#include "runtime/backend/cpu_isa.h"

#include "runtime/backend/gemm.h"
#include "runtime/env_settings.h"
#include "runtime/tensor.h"

namespace tandem::kernels {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// One product on native Eigen scalars (float or double): the tile of C of rows [i0, i0 + m) and columns
// [j0, j0 + n), single-threaded (the library is built with EIGEN_DONT_PARALLELIZE).
template <class T>
void gemm_tile(const GemmArgs& g, const T* a, const T* b, T* c, int64_t i0, int64_t m, int64_t j0, int64_t n) {
  // As stored: A is [m, k] (or [k, m] when transposed), B is [k, n] (or [n, k]).
  const T* at = a + (g.trans_a ? i0 : i0 * g.lda);
  const T* bt = b + (g.trans_b ? j0 * g.ldb : j0);
  ConstMap<T> A(at, g.trans_a ? g.k : m, g.trans_a ? m : g.k, Eigen::OuterStride<>(g.lda));
  ConstMap<T> B(bt, g.trans_b ? n : g.k, g.trans_b ? g.k : n, Eigen::OuterStride<>(g.ldb));
  MutMap<T> C(c + i0 * g.ldc + j0, m, n, Eigen::OuterStride<>(g.ldc));
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  if (g.k == 0) {  // empty inner dimension: C = beta * C
    if (g.beta == 0) C.setZero(); else C *= beta;
    return;
  }
  auto run = [&](const auto& opa, const auto& opb) {
    if (g.beta == 0) {
      C.noalias() = alpha * (opa * opb);
    } else {
      if (g.beta != 1) C *= beta;
      C.noalias() += alpha * (opa * opb);
    }
  };
  if (!g.trans_a && !g.trans_b) run(A, B);
  else if (g.trans_a && !g.trans_b) run(A.transpose(), B);
  else if (!g.trans_a && g.trans_b) run(A, B.transpose());
  else run(A.transpose(), B.transpose());
}

// Below this many flops in all (~ a 64 x 64 x 64 product) one thread computes every tile: a parallel
// region costs more than it saves. The tiles, and so the bits, are the same either way.
constexpr double kEigenParallelMinFlops = 2.0 * 64 * 64 * 64;

// The batch's products on Eigen, tile by tile (gemm_tiles.h); threads take whole tiles, in any order.
template <class T>
void gemm_eigen(const GemmArgs& g) {
  const GemmTiles t = gemm_tiles(g.m, g.n, g.k);
  const int64_t tiles = t.count(), items = g.batch * tiles;
  auto one = [&](int64_t item) {
    const int64_t bi = item / tiles, q = item % tiles;
    const int64_t i0 = q / t.cols * t.tile_m, j0 = q % t.cols * t.tile_n;
    gemm_tile<T>(g, static_cast<const T*>(g.a) + bi * g.stride_a, static_cast<const T*>(g.b) + bi * g.stride_b,
                 static_cast<T*>(g.c) + bi * g.stride_c, i0, std::min(t.tile_m, g.m - i0), j0,
                 std::min(t.tile_n, g.n - j0));
  };
  const bool parallel = items > 1 && 2.0 * double(g.m) * double(g.n) * double(g.k) * double(g.batch) >=
                                         kEigenParallelMinFlops;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t item = 0; item < items; ++item) one(item);
}

// TANDEM_CPU_GEMM's path (auto, eigen, avx512: the values' order in runtime/env_settings.cpp), read
// once; each call loads it, so a test switches paths with env::ScopedValue. GEMMs run in parallel
// regions too: a bad value counts as auto here and is env::check's error, which the programs call first.
enum class ForcedPath { Auto, Eigen, Avx512 };
bool cpu_gemm_forced(ForcedPath path) {
  static const env::Switch gemm_path("TANDEM_CPU_GEMM");
  return gemm_path.index_or_default() == static_cast<int>(path);
}

// Rows through convert_host: AVX-512 where the CPU has it, bit-identical to the scalar conversions
// (the element-by-element casts made f16 GEMMs 4x slower than f32 ones).
template <class T>
void widen(const T* src, float* dst, int64_t n) {
  convert_host(src, dtype_v<T>, dst, DType::f32, n);
}
template <class T>
void narrow(const float* src, T* dst, int64_t n) {
  convert_host(src, DType::f32, dst, dtype_v<T>, n);
}

void gemm_product(const GemmArgs& g);

// f16/bf16 operands go to our AVX2 kernel, which widens them as it packs them (no AVX-512 kernel here).
bool avx2_widens_16bit() { return !cpu_gemm_forced(ForcedPath::Eigen) && !avx512::has_f32() && avx2::has_f32(); }
// f16 operands into an f32 C go to the AVX-512 f32 kernel, which widens them as it packs them.
bool avx512_widens_f16() { return !cpu_gemm_forced(ForcedPath::Eigen) && avx512::has_f32(); }

// f16 (and bf16 without AVX512-BF16): each matrix of the batch widened to a dense f32 copy, multiplied
// as an f32 GEMM (gemm_product picks our kernel or Eigen), rounded once (an f32 C, wide_c, is the
// product's own); on the AVX2 path, and for f16 into an f32 C on AVX-512, the kernel widens A and B in
// its packing instead. The copies are left uninitialised: every element is written before it is read.
template <class T>
void gemm_low_precision(const GemmArgs& g) {
  // f16 into an f32 C on AVX-512: the f32 kernel widens the operands as it packs them.
  if constexpr (std::is_same_v<T, half>)
    if (g.wide_c && avx512_widens_f16()) return avx512::gemm_f16_wide(g);
  // Our AVX2 kernel widens the operands as it packs them: no copies (on the AVX-512 path, and for
  // Eigen, the copies below).
  if (avx2_widens_16bit()) {
    GemmArgs f = g;
    f.bf16_products = false;
    f.wide_c = false;
    if (g.wide_c) return avx2::gemm_widening(f);
    std::unique_ptr<float[]> c(new float[static_cast<size_t>(g.m * g.n)]);
    f.batch = 1;
    f.c = c.get();
    f.ldc = g.n;
    for (int64_t i = 0; i < g.batch; ++i) {
      f.a = static_cast<const T*>(g.a) + i * g.stride_a;
      f.b = static_cast<const T*>(g.b) + i * g.stride_b;
      T* ci = static_cast<T*>(g.c) + i * g.stride_c;
      if (g.beta != 0)
        for (int64_t r = 0; r < g.m; ++r) widen(ci + r * g.ldc, c.get() + r * g.n, g.n);
      avx2::gemm_widening(f);
      for (int64_t r = 0; r < g.m; ++r) narrow(c.get() + r * g.n, ci + r * g.ldc, g.n);
    }
    return;
  }
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  auto buffer = [](int64_t n) { return std::unique_ptr<float[]>(new float[static_cast<size_t>(n)]); };
  std::unique_ptr<float[]> a = buffer(a_rows * a_cols), b = buffer(b_rows * b_cols);
  std::unique_ptr<float[]> c = g.wide_c ? nullptr : buffer(g.m * g.n);
  GemmArgs f = g;
  f.dtype = DType::f32;
  f.bf16_products = false;  // plain f32 products of the copies
  f.wide_c = false;
  f.batch = 1;
  f.a = a.get();
  f.b = b.get();
  f.lda = a_cols;
  f.ldb = b_cols;
  f.ldc = g.wide_c ? g.ldc : g.n;
  for (int64_t i = 0; i < g.batch; ++i) {
    const T* ai = static_cast<const T*>(g.a) + i * g.stride_a;
    const T* bi = static_cast<const T*>(g.b) + i * g.stride_b;
    for (int64_t r = 0; r < a_rows; ++r) widen(ai + r * g.lda, a.get() + r * a_cols, a_cols);
    for (int64_t r = 0; r < b_rows; ++r) widen(bi + r * g.ldb, b.get() + r * b_cols, b_cols);
    if (g.wide_c) {
      f.c = static_cast<float*>(g.c) + i * g.stride_c;
      gemm_product(f);
      continue;
    }
    T* ci = static_cast<T*>(g.c) + i * g.stride_c;
    f.c = c.get();
    if (g.beta != 0)
      for (int64_t r = 0; r < g.m; ++r) widen(ci + r * g.ldc, c.get() + r * g.n, g.n);
    gemm_product(f);
    for (int64_t r = 0; r < g.m; ++r) narrow(c.get() + r * g.n, ci + r * g.ldc, g.n);
  }
}

void cpu_gemm(Device, const GemmArgs& g) {
  TANDEM_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0, "gemm: negative size m={} n={} k={} batch={}",
               g.m, g.n, g.k, g.batch);
  check_gemm_epilogue(g);
  if (!g.has_epilogue()) return gemm_product(g);
  GemmArgs product = g;
  product.bias = product.pre = product.a_row_sums = product.c_col_sums = nullptr;
  product.dgelu_pre = nullptr;
  product.gelu = false;
  gemm_product(product);
  cpu_gemm_epilogue(g);
  cpu_gemm_a_row_sums(g);
}

// The product alone: C = alpha op(A) op(B) + beta C.
void gemm_product(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (!cpu_gemm_forced(ForcedPath::Eigen)) {
    if (g.dtype == DType::bf16 || (g.dtype == DType::f32 && g.bf16_products)) {
      const std::string_view path = cpu_bf16_gemm_path();
      if (path == "amx-bf16") return avx512::gemm_bf16_amx(g);
      if (path == "avx512-bf16") return avx512::gemm_bf16(g);
    }
    if (g.dtype == DType::f32 && avx512::has_f32()) return avx512::gemm_f32(g);
    if (g.dtype == DType::f32 && avx2::has_f32()) return avx2::gemm_f32(g);
  }
  dispatch_floating(g.dtype, "gemm", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      gemm_eigen<T>(g);
    } else {
      gemm_low_precision<T>(g);
    }
  });
}

TANDEM_REGISTER_KERNEL(gemm, DeviceKind::CPU, cpu_gemm);

}  // namespace

bool cpu_f32_gemm_ours() { return !cpu_gemm_forced(ForcedPath::Eigen) && avx512::has_f32(); }

bool cpu_gemm_reads_16bit(DType dtype) {
  // Its callers widen what the GEMM does not read (sums, tiny products) with AVX2 and F16C: every CPU
  // of the paths below has them (AVX-512 implies both), and the ISA cap allows them where it allows
  // AVX-512; checked here so that the callers may count on it.
  if (!is_low_precision(dtype) || !cpu_isa_usable(CpuIsa::avx2)) return false;
  if (dtype == DType::bf16 && std::string_view(cpu_bf16_gemm_path()) != "fp32") return true;
  if (dtype == DType::f16 && avx512_widens_f16()) return true;  // into an f32 C: gemm_f16_wide
  return avx2_widens_16bit();
}

const char* cpu_f32_gemm_isa() {
  if (cpu_gemm_forced(ForcedPath::Eigen)) return "eigen";
  return avx512::has_f32() ? "avx512" : avx2::has_f32() ? "avx2" : "eigen";
}

const char* cpu_bf16_gemm_path() {
  if (cpu_gemm_forced(ForcedPath::Eigen) || !avx512::has_bf16()) return "fp32";
  return avx512::has_amx() && !cpu_gemm_forced(ForcedPath::Avx512) ? "amx-bf16" : "avx512-bf16";
}

}  // namespace tandem::kernels
