// Helpers shared by the comm tests: values computed from the rank, typed buffers held as bytes,
// and the expected result of each reduction over all ranks.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "comm/communicator.h"
#include "runtime/tensor.h"

namespace tandem::comm::test {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
  return d;
}
inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> o = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
  return o;
}
// 0, 1, primes, powers of two, not divisible by 2, 3 or 4.
inline const std::vector<int64_t>& test_sizes() {
  static const std::vector<int64_t> s = {0, 1, 2, 3, 5, 7, 13, 64, 127, 1024, 4099, 65536, 100003};
  return s;
}

// A small integer-valued element of rank r at index i: every sum/avg/max/min is exact in f16.
inline double value_of(int r, int64_t i) { return double((r * 7 + i * 3) % 11) - 5.0 + (r % 2 ? 0.5 : 0.0); }
inline double int_value_of(int r, int64_t i) { return double((r * 7 + i * 3) % 11) - 5.0; }
inline double value_for(DType t, int r, int64_t i) {
  return is_floating(t) ? value_of(r, i) : int_value_of(r, i);
}

// Bytes holding n elements of dtype t converted from doubles.
inline std::vector<char> make_buffer(DType t, const std::vector<double>& v) {
  std::vector<char> b(v.size() * dtype_size(t) + 1);
  convert_host(v.data(), DType::f64, b.data(), t, static_cast<int64_t>(v.size()));
  return b;
}
inline std::vector<double> to_doubles(DType t, const void* p, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  convert_host(p, t, v.data(), DType::f64, n);
  return v;
}

inline std::vector<double> rank_values(DType t, int r, int64_t n, int64_t offset = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value_for(t, r, i + offset);
  return v;
}

// The reduction over ranks 0..size-1 of rank_values, as the dtype would hold it.
inline std::vector<double> expected_reduce(DType t, ReduceOp op, int size, int64_t n, int64_t offset = 0) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double acc = value_for(t, 0, i + offset);
    for (int r = 1; r < size; ++r) {
      double x = value_for(t, r, i + offset);
      if (op == ReduceOp::Max) acc = std::max(acc, x);
      else if (op == ReduceOp::Min) acc = std::min(acc, x);
      else acc += x;
    }
    if (op == ReduceOp::Avg) acc = is_floating(t) ? acc / size : double(int64_t(acc) / size);
    out[static_cast<size_t>(i)] = acc;
  }
  // Round through the dtype, as the result is stored in it.
  auto b = make_buffer(t, out);
  return to_doubles(t, b.data(), n);
}

inline std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

}  // namespace tandem::comm::test
