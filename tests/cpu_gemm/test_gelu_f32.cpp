// GELU's f32 spans (gelu.h) against the tanh formula in f64, on all three paths: the AVX-512 one
// (x * sigmoid(2u)), its AVX2 sibling (the same bits) and Eigen's tanh (CPUs without AVX2). Forward and gradient, a dense sweep of
// x with every span tail, the far tails (where 1 + tanh(u) cancels in f32), and inf, NaN and zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/gelu.h"
#include "runtime/backend/cpu_isa.h"

namespace {

using tandem::kernels::gelu_tanh_f32_eigen;

// The tanh form rewritten as x * sigmoid(2u), exact in f64 where 1 + tanh(u) would cancel.
double sigmoid_2u(double x) { return 1 / (1 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_ref(double x) { return x * sigmoid_2u(x); }
// gelu'(x) = s + 2x s (1 - s) u'; the terms' magnitudes summed (the gradient crosses zero near
// x = -0.75, where its error is relative to the terms, not to their sum).
double gelu_grad_ref(double x, double* magnitude = nullptr) {
  const double s = sigmoid_2u(x), t = 2 * x * s * (1 - s) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
  if (magnitude) *magnitude = std::abs(s) + std::abs(t);
  return s + t;
}

using Path = void (*)(const float*, const float*, float*, int64_t);

void avx512_path(const float* x, const float* g, float* out, int64_t n) {
  tandem::kernels::avx512::gelu_tanh_f32(x, g, out, n);
}
void avx2_path(const float* x, const float* g, float* out, int64_t n) { tandem::kernels::avx2::gelu_tanh_f32(x, g, out, n); }

// The x * sigmoid(2u) kernels this CPU (and TANDEM_CPU_ISA) can run.
struct NamedPath {
  const char* name;
  Path f;
};
std::vector<NamedPath> sigmoid_paths() {
  std::vector<NamedPath> p;
  if (tandem::kernels::avx512::has_f32()) p.push_back({"avx512", &avx512_path});
  if (tandem::cpu_isa_usable(tandem::CpuIsa::avx2)) p.push_back({"avx2", &avx2_path});
  return p;
}

// x from -12 to 12 in steps of 1/256, gradient weights cycling through 1, -0.5, 3.
struct Sweep {
  std::vector<float> x, g;
  Sweep() {
    for (int i = -12 * 256; i <= 12 * 256; ++i) {
      x.push_back(static_cast<float>(i) / 256);
      g.push_back(i % 3 == 0 ? 1.0f : i % 3 == 1 ? -0.5f : 3.0f);
    }
  }
};

// 2u, exp's argument: an f32 argument's rounding (half an ulp of |2u|) becomes that much relative
// error in e^(-2u), so any f32 evaluation's error grows with |2u| in the tails.
double two_u(double x) { return 2 * 0.7978845608028654 * (x + 0.044715 * x * x * x); }

// |got - want| <= (rel + per_u * |2u|) * |want| + abs for the forward, and for the gradient with the
// magnitude of its terms for |want|, over the sweep.
void check_sweep(Path f, double rel, double per_u, double abs) {
  const Sweep s;
  const int64_t n = static_cast<int64_t>(s.x.size());
  std::vector<float> y(s.x.size()), dx(s.x.size());
  f(s.x.data(), nullptr, y.data(), n);
  f(s.x.data(), s.g.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    double terms = 0;
    const double x = s.x[i], want_y = gelu_ref(x), want_dx = s.g[i] * gelu_grad_ref(x, &terms);
    const double r = rel + per_u * std::abs(two_u(x));
    EXPECT_NEAR(y[i], want_y, r * std::abs(want_y) + abs) << "gelu(" << x << ")";
    EXPECT_NEAR(dx[i], want_dx, r * std::abs(s.g[i]) * terms + abs) << "gelu'(" << x << ") * " << s.g[i];
    if (std::getenv("GELU_ERRORS"))
      std::printf("%g %.3g %.3g\n", x, std::abs(y[i] - want_y) / (std::abs(want_y) + 1e-300),
                  std::abs(dx[i] - want_dx) / (std::abs(s.g[i]) * terms + 1e-300));
  }
}

TEST(GeluF32, Avx512PathMatchesTheF64FormulaToAFewUlps) {
  if (!tandem::kernels::avx512::has_f32()) GTEST_SKIP() << "no AVX-512 on this CPU";
  // Relative bounds down to where s is denormal (gelu near -1e-37), the far negative tail included:
  // no cancellation in this form.
  check_sweep(&avx512_path, 4e-7, 1.5e-7, 1e-35);
}

TEST(GeluF32, Avx2PathMatchesTheF64FormulaToAFewUlps) {
  if (!tandem::cpu_isa_usable(tandem::CpuIsa::avx2)) GTEST_SKIP() << "no AVX2 + FMA here (or TANDEM_CPU_ISA)";
  check_sweep(&avx2_path, 4e-7, 1.5e-7, 1e-35);
}

// The AVX2 kernel is the AVX-512 one's formula with two exact powers of two for vscalefps: the same
// bits for every x of the sweep, the far tails (overflowing e^(-2u), denormal results) included.
TEST(GeluF32, Avx2PathHasTheAvx512PathsBits) {
  if (!tandem::kernels::avx512::has_f32() || !tandem::cpu_isa_usable(tandem::CpuIsa::avx2))
    GTEST_SKIP() << "needs both AVX-512 and AVX2 (and TANDEM_CPU_ISA allowing AVX-512)";
  std::vector<float> x, g;
  for (int i = -120 * 64; i <= 120 * 64; ++i) {
    x.push_back(static_cast<float>(i) / 64);
    g.push_back(i % 3 == 0 ? 1.0f : -0.75f);
  }
  for (float v : {1e-38f, -1e-38f, 1e-45f, 88.5f, -88.5f, 9.1f, -9.1f, -9.2f, -9.3f, 3e38f, -3e38f}) {
    x.push_back(v);
    g.push_back(1.0f);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y512(x.size()), y2(x.size()), d512(x.size()), d2(x.size());
  avx512_path(x.data(), nullptr, y512.data(), n);
  avx2_path(x.data(), nullptr, y2.data(), n);
  avx512_path(x.data(), g.data(), d512.data(), n);
  avx2_path(x.data(), g.data(), d2.data(), n);
  int64_t differing = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&y512[i], &y2[i], 4) != 0 || std::memcmp(&d512[i], &d2[i], 4) != 0) {
      if (++differing <= 5)
        ADD_FAILURE() << "x " << x[i] << ": " << y512[i] << " vs " << y2[i] << ", " << d512[i] << " vs " << d2[i];
    }
  }
  EXPECT_EQ(differing, 0);
}

TEST(GeluF32, EigenPathMatchesTheF64Formula) {
  // 1 + tanh(u) cancels for very negative x, and Eigen's tanh is +-1 from |u| = 8 or so: there the
  // Eigen path is only absolutely close (measured on a Zen 4: 6.6e-7 at most for gelu(x), 3.5e-6 for
  // gelu'(x), both near |x| = 4.5).
  check_sweep(&gelu_tanh_f32_eigen, 2e-6, 0, 5e-6 * 3);  // the sweep's weights go up to 3
}

// Every span length up to two vectors and a bit (the masked tail of each), in place and out of
// place: the same value as the long span gives for the same x, and nothing past n written.
void span_tails(Path f) {
  std::vector<float> x(40), g(40);
  for (int i = 0; i < 40; ++i) {
    x[i] = -3.0f + 0.17f * i;
    g[i] = 1.0f + 0.01f * i;
  }
  std::vector<float> full_y(40), full_dx(40);
  f(x.data(), nullptr, full_y.data(), 40);
  f(x.data(), g.data(), full_dx.data(), 40);
  for (int n = 0; n <= 37; ++n) {
    std::vector<float> y(40, -7.0f), dx(40, -7.0f);
    f(x.data(), nullptr, y.data(), n);
    f(x.data(), g.data(), dx.data(), n);
    std::vector<float> in_place(x), in_place_g(g);
    f(in_place.data(), nullptr, in_place.data(), n);
    f(x.data(), in_place_g.data(), in_place_g.data(), n);
    for (int i = 0; i < 40; ++i) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " i " << i);
      EXPECT_EQ(y[i], i < n ? full_y[i] : -7.0f);
      EXPECT_EQ(dx[i], i < n ? full_dx[i] : -7.0f);
      EXPECT_EQ(in_place[i], i < n ? full_y[i] : x[i]);
      EXPECT_EQ(in_place_g[i], i < n ? full_dx[i] : g[i]);
    }
  }
}

TEST(GeluF32, SpanTailsAndAliasingGiveTheSameValues) {
  const std::vector<NamedPath> paths = sigmoid_paths();
  if (paths.empty()) GTEST_SKIP() << "neither AVX-512 nor AVX2 here";
  for (const NamedPath& path : paths) {
    SCOPED_TRACE(path.name);
    span_tails(path.f);
  }
}

void far_tails(Path f) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-30f, 30.0f, 1e4f, 3e38f, inf, -30.0f, -1e4f, nan};
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dx(x.size()), ones(x.size(), 1.0f);
  f(x.data(), nullptr, y.data(), n);
  f(x.data(), ones.data(), dx.data(), n);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(dx[0], 0.5f);
  EXPECT_EQ(y[2], 0.5e-30f);  // gelu(x) = x / 2 near zero
  EXPECT_EQ(y[3], -0.5e-30f);
  for (int i : {4, 5, 6, 7}) EXPECT_EQ(y[i], x[i]) << x[i];  // gelu(x) = x for large x, inf included
  for (int i : {4, 5}) EXPECT_EQ(dx[i], 1.0f) << x[i];
  for (int i : {8, 9}) {  // gelu(x) -> 0 from below, finite
    EXPECT_LE(y[i], 0.0f) << x[i];
    EXPECT_GT(y[i], -1e-30f) << x[i];
    EXPECT_TRUE(std::isfinite(dx[i]) && std::abs(dx[i]) < 1e-30f) << x[i];
  }
  EXPECT_TRUE(std::isnan(y[10]));
  EXPECT_TRUE(std::isnan(dx[10]));
}

TEST(GeluF32, FarTailsInfinitiesAndNaN) {
  const std::vector<NamedPath> paths = sigmoid_paths();
  if (paths.empty()) GTEST_SKIP() << "neither AVX-512 nor AVX2 here";
  for (const NamedPath& path : paths) {
    SCOPED_TRACE(path.name);
    far_tails(path.f);
  }
}

}  // namespace
