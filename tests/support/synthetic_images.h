// A learnable stand-in for Fashion-MNIST, so that Trainer tests run without the real files: n
// images of 28x28, class c lighting up rows [2c+4, 2c+6) over uniform noise.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/random.h"

namespace tandem::testing {

inline data::Dataset synthetic_images(int64_t n, uint64_t seed) {
  Generator gen(seed);
  auto noise = rand_uniform({n, 28, 28}, 0, 120, gen).to_vector<float>();
  std::vector<uint8_t> img(static_cast<size_t>(n * 784)), lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = (i * 7 + 3) % 10;
    lab[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
    for (int64_t p = 0; p < 784; ++p) {
      int64_t row = p / 28;
      float v = noise[static_cast<size_t>(i * 784 + p)] + ((row >= 2 * c + 4 && row < 2 * c + 6) ? 130.0f : 0.0f);
      img[static_cast<size_t>(i * 784 + p)] = static_cast<uint8_t>(std::min(v, 255.0f));
    }
  }
  data::Dataset ds;
  ds.images = Tensor::from_vector(img, {n, 28, 28}, DType::u8);
  ds.labels = Tensor::from_vector(lab, {n}, DType::u8);
  return ds;
}

}  // namespace tandem::testing
