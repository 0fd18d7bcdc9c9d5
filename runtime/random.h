// Generator: a seed and a running Philox offset. Every random op takes one offset (one
// "draw"), so the numbers depend only on (seed, draw count), never on thread count or device.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace tandem {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves the next offset for one draw.
  uint64_t next_offset() { return offset_++; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide default generator (seeded by manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

// Fresh tensors from one draw of `gen` (CPU fill, then moved to device).
Tensor rand_uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype = DType::f32,
                    Device device = kCPU);
Tensor rand_normal(const Shape& shape, double mean, double stddev, Generator& gen, DType dtype = DType::f32,
                   Device device = kCPU);
// A permutation of 0..n-1 (i64) from one draw: sort by Philox keys, ties by index.
std::vector<int64_t> rand_permutation(int64_t n, Generator& gen);

}  // namespace tandem
