// sum_to, expand, argmax, softmax/log_softmax and cross-entropy on the CUDA backend vs the CPU.
#include "kernels/loss.h"
#include "kernels/reduce.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class ReduceOps : public BackendTest {};

const std::vector<std::pair<Shape, Shape>>& sum_cases() {  // src, dst
  static const std::vector<std::pair<Shape, Shape>> c{
      {{0}, {}},        {{1}, {}},          {{2053}, {}},       {{7, 33}, {33}},     {{7, 33}, {7, 1}},
      {{33, 7}, {}},    {{3, 4, 5}, {4, 1}}, {{3, 4, 5}, {3, 1, 5}}, {{300, 3}, {3}}, {{0, 5}, {5}},
      // few outputs over many items: several blocks per output, partials merged in split order
      {{9, 4, 7, 11}, {1, 4, 1, 1}}, {{9, 4, 7, 11}, {4, 1, 1}},
      {{2, 0, 3}, {2, 1, 3}}, {{5, 6}, {5, 6}}};
  return c;
}

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

TEST_P(ReduceOps, SoftmaxForwardBackwardMatchCpu) {
  struct Case { int64_t outer, n, inner; };
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (bool log : {false, true})
      for (Case c : {Case{1, 1, 1}, Case{3, 10, 1}, Case{2, 257, 1}, Case{4, 33, 3}, Case{0, 5, 1}, Case{2, 1000, 1}}) {
        Shape s{c.outer, c.n, c.inner};
        Tensor x = random_tensor(s, dt, 51, -5, 5), gy = random_tensor(s, dt, 52);
        Tensor y = Tensor::empty(s, dt), dy = Tensor::empty(s, dt, dev());
        kernels::softmax(kCPU)(x, y, c.outer, c.n, c.inner, log);
        kernels::softmax(dev())(x.to(dev()), dy, c.outer, c.n, c.inner, log);
        const double rtol = dt == DType::bf16 ? 1e-2 : 1e-5;
        std::string what = std::string(dtype_name(dt)) + (log ? " log_softmax " : " softmax ") + shape_str(s);
        expect_close(dy, y, rtol, what);
        Tensor gx = Tensor::empty(s, dt), dgx = Tensor::empty(s, dt, dev());
        kernels::softmax_backward(kCPU)(gy, y, gx, c.outer, c.n, c.inner, log);
        kernels::softmax_backward(dev())(gy.to(dev()), y.to(dev()), dgx, c.outer, c.n, c.inner, log);
        expect_close(dgx, gx, rtol * 10, what + " backward");
      }
}

TEST_P(ReduceOps, CrossEntropyForwardBackwardMatchCpu) {
  using ops::Reduction;
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (DType it : {DType::i64, DType::i32})
      for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
        for (auto [N, C] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 7}, {33, 10}, {3, 300}, {0, 4}}) {
          Tensor logits = random_tensor({N, C}, dt, 61, -4, 4);
          std::vector<int64_t> t(static_cast<size_t>(N));
          for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = (i * 7) % C;
          if (N > 2) t[1] = -100;  // ignored row
          Tensor target = Tensor::from_vector(t, {N}, it);
          const DType stat = dt == DType::f64 ? DType::f64 : DType::f32;
          Shape ls = red == Reduction::None ? Shape{N} : Shape{};
          Tensor loss = Tensor::empty(ls, dt), lse = Tensor::empty({N}, stat);
          Tensor dloss = Tensor::empty(ls, dt, dev()), dlse = Tensor::empty({N}, stat, dev());
          kernels::cross_entropy(kCPU)(logits, target, loss, lse, -100, red);
          kernels::cross_entropy(dev())(logits.to(dev()), target.to(dev()), dloss, dlse, -100, red);
          const double rtol = dt == DType::f16 ? 2e-3 : 1e-5;
          std::string what = std::string(dtype_name(dt)) + " red " + std::to_string(int(red)) + " N=" + std::to_string(N);
          expect_close(dlse, lse, rtol, what + " lse");
          expect_close(dloss, loss, rtol, what + " loss");
          Tensor g = random_tensor(ls, dt, 62, 0.5, 2);
          Tensor gl = Tensor::empty({N, C}, dt), dgl = Tensor::empty({N, C}, dt, dev());
          kernels::cross_entropy_backward(kCPU)(g, logits, target, lse, gl, -100, red);
          kernels::cross_entropy_backward(dev())(g.to(dev()), logits.to(dev()), target.to(dev()), lse.to(dev()), dgl, -100, red);
          expect_close(dgl, gl, tol(0, ulps(dt)), what + " backward");  // same lse in: exact on SIM
        }
}

TEST_P(ReduceOps, CrossEntropyRejectsAnOutOfRangeTarget) {
  Tensor logits = random_tensor({4, 3}, DType::f32, 1).to(dev());
  Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 2, 3, 1}, {4}).to(dev());
  Tensor loss = Tensor::empty({}, DType::f32, dev()), lse = Tensor::empty({4}, DType::f32, dev());
  try {
    kernels::cross_entropy(dev())(logits, target, loss, lse, -100, ops::Reduction::Mean);
    FAIL() << "no error for target 3 with 3 classes";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("target 3 at row 2"), std::string::npos) << e.what();
  }
}

TANDEM_BACKEND_SUITE(ReduceOps);

}  // namespace
}  // namespace tandem::testing
