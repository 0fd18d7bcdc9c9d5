// Random tensors from Philox draws.
#include "runtime/random.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/backend/common/philox.h"

namespace tandem {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

// Every element is a function of (seed, offset, its index) alone, so the loops below split over the
// OpenMP threads with the same values on any thread count (GPT-2's 124M normals took ~10 s on one
// core). Small tensors stay on the calling thread.
constexpr int64_t kParallelDraws = int64_t(1) << 16;

Tensor rand_uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype, Device device) {
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n >= kParallelDraws)
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = low + (high - low) * philox_uniform(seed, offset, static_cast<uint64_t>(i));
  return Tensor::from_vector(v, shape, dtype, device);
}

Tensor rand_normal(const Shape& shape, double mean, double stddev, Generator& gen, DType dtype, Device device) {
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  // Box-Muller on the pair of uniforms (2i, 2i+1); u1 is shifted into (0, 1] so log is finite.
#pragma omp parallel for schedule(static) if (n >= kParallelDraws)
  for (int64_t i = 0; i < n; ++i) {
    double u1 = 1.0 - philox_uniform(seed, offset, 2 * static_cast<uint64_t>(i));
    double u2 = philox_uniform(seed, offset, 2 * static_cast<uint64_t>(i) + 1);
    v[static_cast<size_t>(i)] = mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  return Tensor::from_vector(v, shape, dtype, device);
}

std::vector<int64_t> rand_permutation(int64_t n, Generator& gen) {
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Philox4 b = philox4x32_10(seed, static_cast<uint64_t>(i), offset);
    keys[static_cast<size_t>(i)] = (uint64_t(b.v[0]) << 32) | b.v[1];
  }
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    auto ka = keys[static_cast<size_t>(a)], kb = keys[static_cast<size_t>(b)];
    return ka != kb ? ka < kb : a < b;
  });
  return idx;
}

}  // namespace tandem
