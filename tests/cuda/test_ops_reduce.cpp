// sum_to, expand and argmax on the CUDA backend vs the CPU.
#include "runtime/backend/reduce.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

const std::vector<std::pair<Shape, Shape>>& sum_cases() {  // src, dst
  static const std::vector<std::pair<Shape, Shape>> c{
      {{0}, {}},        {{1}, {}},          {{2053}, {}},       {{7, 33}, {33}},     {{7, 33}, {7, 1}},
      {{33, 7}, {}},    {{3, 4, 5}, {4, 1}}, {{3, 4, 5}, {3, 1, 5}}, {{300, 3}, {3}}, {{0, 5}, {5}},
      // few outputs over many items: several blocks per output, partials merged in split order
      {{9, 4, 7, 11}, {1, 4, 1, 1}}, {{9, 4, 7, 11}, {4, 1, 1}},
      {{2, 0, 3}, {2, 1, 3}}, {{5, 6}, {5, 6}},
      // a bias's broadcast: expand moves whole rows in packs of up to 16 bytes
      {{64, 48}, {48}}, {{3, 8, 16}, {8, 16}}};
  return c;
}

class ReduceOps : public BackendTest {};

TEST_P(ReduceOps, SumToMatchesCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8})
    for (auto& [ss, sd] : sum_cases())
      for (double scale : {1.0, 0.25}) {
        Tensor src = random_tensor(ss, dt, 31, 0, 5);
        Tensor want = Tensor::empty(sd, dt), got = Tensor::empty(sd, dt, dev());
        kernels::sum_to(kCPU)(src, want, scale);
        kernels::sum_to(dev())(src.to(dev()), got, scale);
        // Integers are exact; floats differ only in the order of the additions.
        const double rtol = is_floating(dt) ? (is_low_precision(dt) ? 1e-2 : 1e-5) : 0;
        expect_close(got, want, rtol, std::string(dtype_name(dt)) + " " + shape_str(ss) + "->" + shape_str(sd));
      }
}

TEST_P(ReduceOps, ExpandMatchesCpuExactly) {
  for (DType dt : {DType::f32, DType::f16, DType::i64})
    for (auto& [sd, ss] : sum_cases())
      for (double scale : {1.0, -0.5}) {
        Tensor src = random_tensor(ss, dt, 32);
        Tensor want = Tensor::empty(sd, dt), got = Tensor::empty(sd, dt, dev());
        kernels::expand(kCPU)(src, want, scale);
        kernels::expand(dev())(src.to(dev()), got, scale);
        expect_close(got, want, 0, std::string(dtype_name(dt)) + " " + shape_str(ss) + "->" + shape_str(sd));
      }
}

TEST_P(ReduceOps, ArgmaxMatchesCpuIncludingTiesAndNaN) {
  struct Case { int64_t outer, n, inner; };
  for (DType dt : {DType::f32, DType::f16, DType::i32})
    for (Case c : {Case{1, 1, 1}, Case{3, 7, 1}, Case{2, 300, 3}, Case{0, 4, 2}, Case{5, 33, 2}}) {
      // Few distinct values: plenty of ties.
      Tensor src = random_tensor({c.outer, c.n, c.inner}, dt, 41, 0, 4);
      if (dt == DType::f32 && c.outer * c.n * c.inner > 10) {
        std::vector<float> v = src.to_vector<float>();
        v[5] = NAN;
        src = Tensor::from_vector(v, src.shape(), dt);
      }
      Tensor want = Tensor::empty({c.outer, c.inner}, DType::i64), got = Tensor::empty({c.outer, c.inner}, DType::i64, dev());
      kernels::argmax(kCPU)(src, want, c.outer, c.n, c.inner);
      kernels::argmax(dev())(src.to(dev()), got, c.outer, c.n, c.inner);
      expect_close(got, want, 0, dtype_name(dt));
    }
}

// Also instantiates the ReduceOps tests of test_ops_loss.cpp.

TANDEM_BACKEND_SUITE(ReduceOps);

}  // namespace
}  // namespace tandem::testing
