// The CPU GEMM (our AVX-512 kernels where the CPU has them, bf16 on AMX tiles where it has those, our
// AVX2+FMA kernel where it has no AVX-512: the suite's _avx2 run forces it, else Eigen) against an f64
// reference over tails in every dimension, all transposes, alpha/beta, padded leading dimensions,
// batches and K/N/M larger than one cache block; bf16 against the f64 product of the bf16 inputs (with
// a bf16 C, and with an f32 C: wide_c); every epilogue; thread invariance; the AVX-512 bf16 kernel
// also where AMX would be taken.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/gemm_tiles.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/convert_avx512.h"
#include "runtime/env_settings.h"
#include "tests/support/cpu_gemm_path.h"
#include "runtime/backend/common/half.h"
#include "runtime/backend/gemm.h"
#include "runtime/tensor.h"

using namespace tandem;

namespace {

struct Shape {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  int64_t batch;
};

// Element types of the operands as stored: f32, bf16, or f32 with bf16 values (bf16_products); C
// has the operands' type, but BF16WideC's and F16WideC's (f16 operands) is f32 (GemmArgs::wide_c).
enum class Kind { F32, BF16, F32AsBF16, BF16WideC, F16WideC };

struct Problem {
  Shape s;
  int64_t lda, ldb, ldc, sa, sb, sc;
  std::vector<double> a, b, c0;  // the exact stored values
};

double round_bf16(double v) { return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v))); }
double round_f16(double v) { return half_bits_to_float(float_to_half_bits(static_cast<float>(v))); }

Problem make(const Shape& s, Kind kind, std::mt19937& rng) {
  Problem p{s, 0, 0, 0, 0, 0, 0, {}, {}, {}};
  p.lda = (s.ta ? s.m : s.k) + 3;
  p.ldb = (s.tb ? s.k : s.n) + 5;
  p.ldc = s.n + 2;
  p.sa = (s.ta ? s.k : s.m) * p.lda;
  p.sb = (s.tb ? s.n : s.k) * p.ldb;
  p.sc = s.m * p.ldc + 1;
  std::uniform_real_distribution<double> u(-1, 1);
  auto fill = [&](std::vector<double>& v, int64_t n, bool f32) {
    v.resize(static_cast<size_t>(n));
    for (double& x : v) x = f32 ? double(float(u(rng))) : kind == Kind::F16WideC ? round_f16(u(rng)) : round_bf16(u(rng));
  };
  fill(p.a, s.batch * p.sa, kind == Kind::F32);
  fill(p.b, s.batch * p.sb, kind == Kind::F32);
  fill(p.c0, s.batch * p.sc, kind == Kind::F32 || kind == Kind::BF16WideC || kind == Kind::F16WideC);
  return p;
}

// Runs the CPU GEMM on the problem; C starts as c0, or NaN where beta == 0 (it must be overwritten).
std::vector<double> run(const Problem& p, Kind kind) {
  const Shape& s = p.s;
  const bool b16 = kind == Kind::BF16 || kind == Kind::BF16WideC, c16_out = kind == Kind::BF16;
  const bool h16 = kind == Kind::F16WideC;
  std::vector<float> a32, b32, c32;
  std::vector<bfloat16> a16, b16v, c16;
  std::vector<half> ah, bh;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto c_init = [&](double v) { return s.beta == 0 ? nan : v; };
  for (double v : p.a) b16 ? a16.push_back(bfloat16(float(v))) : h16 ? ah.push_back(half(float(v))) : a32.push_back(float(v));
  for (double v : p.b) b16 ? b16v.push_back(bfloat16(float(v))) : h16 ? bh.push_back(half(float(v))) : b32.push_back(float(v));
  for (double v : p.c0) c16_out ? c16.push_back(bfloat16(float(c_init(v)))) : c32.push_back(float(c_init(v)));
  kernels::GemmArgs g;
  g.dtype = b16 ? DType::bf16 : h16 ? DType::f16 : DType::f32;
  g.bf16_products = kind == Kind::F32AsBF16;
  g.wide_c = kind == Kind::BF16WideC || h16;
  g.trans_a = s.ta;
  g.trans_b = s.tb;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = b16 ? static_cast<const void*>(a16.data()) : h16 ? static_cast<const void*>(ah.data()) : a32.data();
  g.b = b16 ? static_cast<const void*>(b16v.data()) : h16 ? static_cast<const void*>(bh.data()) : b32.data();
  g.c = c16_out ? static_cast<void*>(c16.data()) : c32.data();
  g.lda = p.lda;
  g.ldb = p.ldb;
  g.ldc = p.ldc;
  g.alpha = s.alpha;
  g.beta = s.beta;
  g.batch = s.batch;
  g.stride_a = p.sa;
  g.stride_b = p.sb;
  g.stride_c = p.sc;
  kernels::gemm(kCPU)(kCPU, g);
  std::vector<double> out;
  if (c16_out)
    for (bfloat16 v : c16) out.push_back(float(v));
  else
    for (float v : c32) out.push_back(v);
  return out;
}

// |C - ref| <= (k + 2) * eps * (|alpha| sum |a||b| + |beta c|) (+ half an ulp of bf16 output).
void check(const Shape& s, Kind kind, std::mt19937& rng) {
  const Problem p = make(s, kind, rng);
  const std::vector<double> c = run(p, kind);
  const double eps = std::ldexp(1.0, -23), out_eps = kind == Kind::BF16 ? std::ldexp(1.0, -8) : 0.0;
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          const double av = p.a[bi * p.sa + (s.ta ? l * p.lda + i : i * p.lda + l)];
          const double bv = p.b[bi * p.sb + (s.tb ? j * p.ldb + l : l * p.ldb + j)];
          acc += av * bv;
          mag += std::abs(av * bv);
        }
        const size_t at = static_cast<size_t>(bi * p.sc + i * p.ldc + j);
        const double cb = s.beta == 0 ? 0.0 : s.beta * p.c0[at];
        const double want = s.alpha * acc + cb;
        const double bound = double(s.k + 2) * eps * (std::abs(s.alpha) * mag + std::abs(cb)) +
                             out_eps * std::abs(want) + 1e-30;
        ASSERT_LE(std::abs(c[at] - want), bound)
            << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << s.ta << " tb=" << s.tb << " alpha=" << s.alpha
            << " beta=" << s.beta << " batch " << bi << " at (" << i << "," << j << ") got " << c[at] << " want " << want;
      }
  // Padding between rows and batch entries of C is never written.
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = s.n; j < p.ldc; ++j) {
        const size_t at = static_cast<size_t>(bi * p.sc + i * p.ldc + j);
        ASSERT_TRUE(c[at] == p.c0[at] || (s.beta == 0 && std::isnan(c[at]))) << "padding written at " << at;
      }
}

std::vector<Shape> shapes(std::mt19937& rng) {
  std::vector<Shape> out;
  const int64_t dims[] = {1, 2, 3, 7, 13, 14, 15, 16, 17, 29, 31, 32, 33, 47, 63, 64, 65, 70, 127, 128, 129};
  const double ab[][2] = {{1, 0}, {0.5, 1}, {-2, -0.5}, {1, 1}};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(dims)) - 1), pab(0, 3);
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    out.push_back({1, 1, 1, ta, tb, 1, 0, 1});
    for (int r = 0; r < 14; ++r) {
      const int q = pab(rng);
      out.push_back({dims[pick(rng)], dims[pick(rng)], dims[pick(rng)], ta, tb, ab[q][0], ab[q][1], 1 + r % 3});
    }
    out.push_back({257, 33, 70, ta, tb, 1, 0, 1});     // more rows than one A block (MC = 168)
    out.push_back({9, 1100, 19, ta, tb, 1, 1, 1});      // more columns than one B block (NC = 1024)
    out.push_back({5, 40, 2101, ta, tb, 0.5, -1, 2});  // K over several blocks (KC = 1024), odd tail
    out.push_back({13, 17, 0, ta, tb, 1, 0.5, 1});     // empty K: C = beta C
    out.push_back({771, 9, 30, ta, tb, 1, 0.5, 1});    // more rows than the AVX2 kernel's largest A block (MC <= 768)
    out.push_back({3, 4099, 21, ta, tb, -1, 0, 1});    // more columns than its largest B block (NC <= 4096)
    out.push_back({7, 17, 513, ta, tb, 1, 1, 1});      // K over its blocks (KC = 256), odd tail
    out.push_back({775, 40, 600, ta, tb, 0.5, 1, 1});  // several A blocks and K blocks (B packed whole)
  }
  return out;
}

void check_all(Kind kind) {
  std::mt19937 rng(static_cast<unsigned>(kind) + 1);
  for (const Shape& s : shapes(rng)) {
    check(s, kind, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The f16-into-f32 product of every shape against the f32 product of the same (widened) values.
void check_f16_wide_is_f32() {
  std::mt19937 rng(8);
  for (const Shape& s : shapes(rng)) {
    const Problem p = make(s, Kind::F16WideC, rng);
    const std::vector<double> wide = run(p, Kind::F16WideC), f32 = run(p, Kind::F32);
    ASSERT_EQ(wide.size(), f32.size());
    for (size_t i = 0; i < wide.size(); ++i) {
      if (std::isnan(wide[i]) && std::isnan(f32[i])) continue;
      ASSERT_EQ(wide[i], f32[i]) << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << s.ta << " tb=" << s.tb
                                 << " batch " << s.batch << " at " << i;
    }
  }
}

// Several of Eigen's tiles (gemm_tiles.h) each: one product, and a batch with both operands transposed.
// The AVX2 kernel packs B panel by panel for one block of rows and enough panels per thread, else
// whole: {300, 40, 600} takes the first at 1 thread and the second at 2 and 3, {800, ...} the second.
std::vector<Shape> invariance_shapes(bool tb) {
  return {{600, 530, 100, false, tb, 1, 0, 1}, {520, 300, 170, tb, tb, 0.5, 1, 3}, {300, 40, 600, tb, tb, 1, 1, 1},
          {800, 530, 300, false, tb, 1, 0, 1}};
}

}  // namespace

TEST(CpuGemm, F32MatchesF64Reference) { check_all(Kind::F32); }
TEST(CpuGemm, Bf16MatchesF64ReferenceOfBf16Inputs) { check_all(Kind::BF16); }
TEST(CpuGemm, F32WithBf16ValuesMatchesF64Reference) { check_all(Kind::F32AsBF16); }
TEST(CpuGemm, Bf16IntoF32MatchesF64Reference) { check_all(Kind::BF16WideC); }
TEST(CpuGemm, F16IntoF32MatchesF64Reference) { check_all(Kind::F16WideC); }

// f16 operands into an f32 C are widened as they are packed (the AVX-512 and AVX2 kernels) or copied
// (Eigen): either way the result is the f32 product of the widened values, bit for bit (the
// convolution's 16-bit path relies on it).
TEST(CpuGemm, F16IntoF32IsTheF32ProductOfTheWidenedValuesBitForBit) { check_f16_wide_is_f32(); }

TEST(CpuGemm, EigenFallbackMatchesReference) {
  tandem::testing::CpuGemmPath eigen("eigen");
  std::mt19937 rng(4);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check({37, 45, 70, ta, tb, 0.5, 1, 2}, Kind::F32, rng);
      check({37, 45, 70, ta, tb, 1, 0, 2}, Kind::BF16, rng);
      check({37, 45, 70, ta, tb, 1, 0, 1}, Kind::F32AsBF16, rng);
      check({37, 45, 70, ta, tb, 1, 1, 2}, Kind::BF16WideC, rng);
      check({37, 45, 70, ta, tb, 1, 1, 2}, Kind::F16WideC, rng);
    }
}


// On a CPU with AMX the tests above ran the tile kernel; the AVX-512 bf16 kernel must stay right too.
TEST(CpuGemm, Bf16WithoutAmxMatchesF64Reference) {
  tandem::testing::CpuGemmPath avx512("avx512");
  check_all(Kind::BF16);
  check_all(Kind::F32AsBF16);
  check_all(Kind::BF16WideC);
}

// Where the CPU has AMX the bf16 product runs on its tiles. tdpbf16ps rounds its sums differently
// from vdpbf16ps (it adds a pair's two products before adding them to the sum, and orders a tile's 16
// pairs its own way), so its f32 results differ from the AVX-512 kernel's in low bits somewhere: the
// sign that the tile kernel ran (both meet the reference bound in the tests above).
TEST(CpuGemm, Bf16RunsOnAmxTilesWhereTheCpuHasThem) {
  if (std::string(kernels::cpu_bf16_gemm_path()) != "amx-bf16")
    GTEST_SKIP() << "no AMX tiles here (the CPU, its kernel, or TANDEM_CPU_GEMM)";
  std::mt19937 rng(6);
  const Problem p = make({70, 45, 300, false, false, 1, 0, 1}, Kind::BF16WideC, rng);
  const std::vector<double> amx = run(p, Kind::BF16WideC);
  std::vector<double> avx;
  {
    tandem::testing::CpuGemmPath avx512("avx512");
    avx = run(p, Kind::BF16WideC);
  }
  size_t differ = 0;
  for (size_t i = 0; i < amx.size(); ++i) differ += amx[i] != avx[i] && !(std::isnan(amx[i]) && std::isnan(avx[i]));
  EXPECT_GT(differ, 0u) << "the default bf16 path gave the AVX-512 kernel's bits everywhere: AMX unused?";
}

// vdpbf16ps treats denormal inputs as zero: products of tiny values must come out as (close to) zero,
// never as NaN or garbage, and the normal products around them must be exact.
TEST(CpuGemm, Bf16DenormalInputsGiveNoGarbage) {
  const int64_t m = 3, n = 20, k = 9;
  std::vector<bfloat16> a(m * k), b(k * n), c(m * n, bfloat16(std::numeric_limits<float>::quiet_NaN()));
  for (int64_t i = 0; i < m * k; ++i) a[i] = bfloat16(i % 2 ? 1e-39f : 1.0f);  // 1e-39 is denormal
  for (int64_t i = 0; i < k * n; ++i) b[i] = bfloat16(i % 3 ? 2.0f : -3e-39f);
  kernels::GemmArgs g;
  g.dtype = DType::bf16;
  g.m = m; g.n = n; g.k = k;
  g.a = a.data(); g.lda = k;
  g.b = b.data(); g.ldb = n;
  g.c = c.data(); g.ldc = n;
  kernels::gemm(kCPU)(kCPU, g);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;  // sum over the normal products only (denormal ones are below 1e-38)
      for (int64_t l = 0; l < k; ++l) {
        const float av = a[i * k + l], bv = b[l * n + j];
        if (std::abs(av) > 1e-30f && std::abs(bv) > 1e-30f) want += double(av) * bv;
      }
      const double got = float(c[i * n + j]);
      EXPECT_TRUE(std::isfinite(got)) << i << "," << j;
      EXPECT_NEAR(got, want, 1e-30 + std::ldexp(std::abs(want), -8)) << i << "," << j;
    }
}

// Threads split M and N only: the result is bitwise the same for any thread count, on our kernels
// and on Eigen's tiles (several tiles here: gemm_tiles below), one product and a batch.
TEST(CpuGemm, ThreadCountInvariantBitwise) {
  std::mt19937 rng(5);
  const int saved = omp_get_max_threads();
  for (const char* path : {"", "eigen"}) {
    std::unique_ptr<tandem::testing::CpuGemmPath> pin;
    if (*path) pin = std::make_unique<tandem::testing::CpuGemmPath>(path);
    for (Kind kind : {Kind::F32, Kind::BF16, Kind::BF16WideC})
      for (bool tb : {false, true})
        for (const auto& s : invariance_shapes(tb)) {
          const Problem p = make(s, kind, rng);
          omp_set_num_threads(1);
          const std::vector<double> one = run(p, kind);
          for (int threads : {2, 3}) {
            omp_set_num_threads(threads);
            const std::vector<double> many = run(p, kind);
            for (size_t i = 0; i < one.size(); ++i)
              ASSERT_TRUE(one[i] == many[i] || (std::isnan(one[i]) && std::isnan(many[i])))
                  << "path '" << path << "' kind " << int(kind) << " m=" << s.m << " tb=" << tb << " threads "
                  << threads << " at " << i;
          }
        }
  }
  omp_set_num_threads(saved);
}

// Eigen's tiles over products of several tiles (the reference shapes above are one tile each), against the
// f64 reference: every element written once, none outside C.
TEST(CpuGemm, EigenTilesMatchReference) {
  tandem::testing::CpuGemmPath eigen("eigen");
  std::mt19937 rng(7);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      ASSERT_EQ(kernels::gemm_tiles(600, 530, 100).count(), 4);
      ASSERT_EQ(kernels::gemm_tiles(520, 300, 170).count(), 2);
      ASSERT_EQ(kernels::gemm_tiles(65, 700, 200).count(), 2);
      check({600, 530, 100, ta, tb, 0.5, 1, 1}, Kind::F32, rng);
      check({520, 300, 170, ta, tb, 1, 0, 2}, Kind::F32, rng);
      check({65, 700, 200, ta, tb, -2, -0.5, 1}, Kind::BF16, rng);
    }
}

// The grid depends on the sizes only; it covers C with tiles whose split edges are multiples of 64 and at
// least 256, at most 32 of them, each above ~4 MFLOP unless C is one tile; small products are one tile.
TEST(CpuGemm, EigenTileGrid) {
  for (int64_t m : {1, 63, 64, 65, 128, 301, 1000, 4096})
    for (int64_t n : {1, 10, 64, 129, 512, 3000})
      for (int64_t k : {0, 1, 16, 300, 784, 5000}) {
        const kernels::GemmTiles t = kernels::gemm_tiles(m, n, k);
        ASSERT_GE(t.rows * t.tile_m, m);
        ASSERT_LT((t.rows - 1) * t.tile_m, m);
        ASSERT_GE(t.cols * t.tile_n, n);
        ASSERT_LT((t.cols - 1) * t.tile_n, n);
        ASSERT_LE(t.count(), 32);
        if (t.rows > 1) {
          ASSERT_TRUE(t.tile_m % 64 == 0 && t.tile_m >= 256) << m << "x" << n << "x" << k;
        }
        if (t.cols > 1) {
          ASSERT_TRUE(t.tile_n % 64 == 0 && t.tile_n >= 256) << m << "x" << n << "x" << k;
        }
        if (t.count() > 1) {
          ASSERT_GE(2.0 * t.tile_m * t.tile_n * k, 4.0 * (1 << 20)) << m << "x" << n << "x" << k;
        }
      }
  EXPECT_EQ(kernels::gemm_tiles(64, 64, 64).count(), 1);
  EXPECT_EQ(kernels::gemm_tiles(380, 380, 1000).count(), 1);   // halves of 192 rows: one tile
  EXPECT_EQ(kernels::gemm_tiles(511, 511, 1000).count(), 4);   // halves of 256 and 255
  EXPECT_EQ(kernels::gemm_tiles(128, 512, 784).count(), 2);    // tandem-train's mlp, first layer: 128 x 256
  EXPECT_EQ(kernels::gemm_tiles(512, 784, 128).count(), 4);    // its weight gradient: 256 x 448 and 256 x 336
  EXPECT_EQ(kernels::gemm_tiles(4096, 4096, 4096).count(), 32);
}

// The f32 products ran on our AVX2 kernel in the _avx2 run (where the CPU has AVX2 and FMA), on the
// AVX-512 one in the other (where it has AVX-512).
TEST(CpuGemm, F32RunsOnOurKernelForTheIsa) {
  const bool capped = env::choice("TANDEM_CPU_ISA") == 1;
  if (cpu_isa_usable(CpuIsa::avx512)) {
    EXPECT_STREQ(kernels::cpu_f32_gemm_isa(), "avx512");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    EXPECT_TRUE(kernels::avx2::has_f32());
    EXPECT_STREQ(kernels::cpu_f32_gemm_isa(), "avx2");
  } else {
    GTEST_SKIP() << "no AVX2/FMA here: Eigen's products run";
  }
  if (capped) {
    EXPECT_STREQ(kernels::cpu_f32_gemm_isa(), "avx2");
  }
  tandem::testing::CpuGemmPath eigen("eigen");
  EXPECT_STREQ(kernels::cpu_f32_gemm_isa(), "eigen");
}

// The AVX2 kernel widens f16/bf16 A and B as it packs them (gemm.cpp's route on the AVX2 path): the
// bits of its f32 product of widened copies, for every transpose, tails in every dimension, K over two
// blocks, a batch, padded leading dimensions, alpha and beta.
TEST(CpuGemm, Avx2WideningPackingEqualsF32OfWidenedCopies) {
  if (!kernels::avx2::has_f32()) GTEST_SKIP() << "no AVX2/FMA/F16C here (or TANDEM_CPU_ISA=generic)";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2, 2);
  struct Mnk { int64_t m, n, k; };
  for (DType dt : {DType::f16, DType::bf16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const Mnk& s : {Mnk{1, 1, 1}, Mnk{7, 17, 9}, Mnk{13, 33, 300}, Mnk{40, 5, 257}}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " ta " << ta << " tb " << tb << " " << s.m << "x"
                                            << s.n << "x" << s.k);
          const int64_t batch = 2, a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k, b_rows = tb ? s.n : s.k,
                        b_cols = tb ? s.k : s.n, lda = a_cols + 3, ldb = b_cols + 5, ldc = s.n + 2;
          std::vector<uint16_t> a16(size_t(batch * a_rows * lda)), b16(size_t(batch * b_rows * ldb));
          for (auto* v : {&a16, &b16})
            for (uint16_t& x : *v) x = dt == DType::f16 ? float_to_half_bits(u(rng)) : float_to_bf16_bits(u(rng));
          std::vector<float> a32(a16.size()), b32(b16.size());
          convert_host(a16.data(), dt, a32.data(), DType::f32, int64_t(a16.size()));
          convert_host(b16.data(), dt, b32.data(), DType::f32, int64_t(b16.size()));
          std::vector<float> c16(size_t(batch * s.m * ldc), 0.5f), c32 = c16;
          kernels::GemmArgs g;
          g.dtype = dt;
          g.trans_a = ta;
          g.trans_b = tb;
          g.m = s.m; g.n = s.n; g.k = s.k;
          g.a = a16.data(); g.lda = lda;
          g.b = b16.data(); g.ldb = ldb;
          g.c = c16.data(); g.ldc = ldc;
          g.alpha = 1.5;
          g.beta = 0.25;
          g.batch = batch;
          g.stride_a = a_rows * lda;
          g.stride_b = b_rows * ldb;
          g.stride_c = s.m * ldc;
          kernels::avx2::gemm_widening(g);
          kernels::GemmArgs f = g;
          f.dtype = DType::f32;
          f.a = a32.data();
          f.b = b32.data();
          f.c = c32.data();
          kernels::avx2::gemm_f32(f);
          int64_t differing = 0;
          for (size_t i = 0; i < c16.size(); ++i) differing += float_bits(c16[i]) != float_bits(c32[i]);
          EXPECT_EQ(differing, 0);
        }
}

// Under TANDEM_CPU_ISA=avx2 (the suite's *_avx2 runs) no AVX-512 path is taken, whatever the CPU has.
TEST(CpuGemm, IsaCapTurnsOffEveryAvx512Path) {
  if (env::choice("TANDEM_CPU_ISA") != 1) GTEST_SKIP() << "runs under TANDEM_CPU_ISA=avx2";
  EXPECT_STREQ(cpu_isa_cap(), "avx2");
  EXPECT_FALSE(cpu_isa_allows(CpuIsa::avx512));
  EXPECT_FALSE(kernels::avx512::has_f32());
  EXPECT_FALSE(kernels::avx512::has_bf16());
  EXPECT_FALSE(kernels::avx512::has_amx());
  EXPECT_FALSE(kernels::cpu_f32_gemm_ours());
  EXPECT_STREQ(kernels::cpu_bf16_gemm_path(), "fp32");
  EXPECT_EQ(convert_avx512_loops(), nullptr);
}
