// Fixture for the CUDA-backend op tests: each test runs on DeviceKind::SIM (the SIMT emulator,
// always) and on DeviceKind::CUDA (skipped, with the reason, when there is no device), and compares
// with the CPU backend. SIM is exact wherever the op is exact; CUDA may differ by rounding (FMA).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/device_query.h"
#include "runtime/tensor.h"

namespace tandem::testing {

class BackendTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::CUDA && cuda::device_count() == 0)
      GTEST_SKIP() << "CUDA backend not tested: " << cuda::describe();
  }
  Device dev() const { return Device(GetParam(), 0); }
  bool emulated() const { return GetParam() == DeviceKind::SIM; }
  // Relative tolerance: sim_tol on SIM (0: bitwise), gpu_tol on a GPU (its own libm and FMAs).
  double tol(double sim_tol, double gpu_tol = 1e-5) const { return emulated() ? sim_tol : gpu_tol; }
  // A few units in the last place of dt: the same formula in the same order can still differ by
  // that much where the host compiler contracts a*b+c into an FMA in one build and not the other
  // (g++ contracts by default in C++ mode).
  double ulps(DType dt) const {
    double eps = dt == DType::f64 ? 2.2e-16 : dt == DType::f16 ? 9.8e-4 : dt == DType::bf16 ? 7.8e-3 : 1.2e-7;
    return emulated() ? 4 * eps : std::max(4 * eps, 1e-5);
  }
};

inline std::string kind_name(const ::testing::TestParamInfo<DeviceKind>& info) {
  return info.param == DeviceKind::SIM ? "Sim" : "Cuda";
}

#define TANDEM_BACKEND_SUITE(Suite)                                                                 \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::Values(DeviceKind::SIM, DeviceKind::CUDA), \
                           ::tandem::testing::kind_name)

// Reproducible values in [lo, hi) as a CPU tensor of dtype.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  if (!is_floating(dtype))
    for (double& x : v) x = std::floor(x);
  return Tensor::from_vector(v, shape, dtype);
}

// Element-wise comparison of `got` (any device) with `want` (CPU): |g - w| <= rtol * (|w| + 1).
// rtol == 0 demands identical values (NaN matches NaN).
inline void expect_close(const Tensor& got, const Tensor& want, double rtol, const std::string& what = "") {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              std::abs(g[i] - w[i]) <= rtol * (std::abs(w[i]) + 1.0);
    if (!ok && bad++ < 5) ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ (rtol " << rtol << ")";
}

// Sizes that hit the edge cases: empty, one element, partial warps and blocks, non-powers of two.
inline const std::vector<int64_t>& edge_sizes() {
  static const std::vector<int64_t> s{0, 1, 7, 31, 33, 255, 257, 1000, 2053};
  return s;
}

}  // namespace tandem::testing
