// Broadcasting binary ops, unary ops and their backward on the CUDA backend vs the CPU backend.
#include <limits>

#include "runtime/backend/elementwise.h"
#include "runtime/ops/shape.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

class ElementwiseOps : public BackendTest {};

const std::vector<std::pair<Shape, Shape>>& broadcast_cases() {
  static const std::vector<std::pair<Shape, Shape>> c{
      {{0}, {0}},          {{1}, {1}},          {{257}, {257}},       {{2053}, {1}},     {{}, {33}},
      {{7, 33}, {33}},     {{7, 33}, {7, 1}},   {{3, 1, 5}, {1, 4, 1}}, {{2, 3, 4, 5}, {3, 1, 5}}, {{0, 3}, {3}},
      {{31, 9}, {31, 9}}};
  return c;
}

TEST_P(ElementwiseOps, BinaryBroadcastMatchesCpuExactly) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::u8})
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div}) {
      if (op == BinaryOp::Div && !is_floating(dt)) continue;
      for (auto& [sa, sb] : broadcast_cases()) {
        Tensor a = random_tensor(sa, dt, 11, 1, 9), b = random_tensor(sb, dt, 12, 1, 9);
        Shape so = kernels::broadcast_shapes(sa, sb, "test");
        Tensor want = Tensor::empty(so, dt), got = Tensor::empty(so, dt, dev());
        kernels::binary(kCPU)(op, a, b, want);
        kernels::binary(dev())(op, a.to(dev()), b.to(dev()), got);
        expect_close(got, want, tol(0, ulps(dt)),
                     std::string(dtype_name(dt)) + " op " + std::to_string(int(op)) + " " + shape_str(sa) + shape_str(sb));
      }
    }
}

// The select over every dtype and broadcast case (cond broadcast against both operands), with
// infinities in the operands: exact, as a select must be.
TEST_P(ElementwiseOps, WhereMatchesCpuExactly) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::u8})
    for (auto& [sa, sb] : broadcast_cases()) {
      Shape so = kernels::broadcast_shapes(sa, sb, "test");
      Shape sc = so.empty() ? so : Shape(so.begin() + static_cast<std::ptrdiff_t>(so.size() - 1), so.end());
      Tensor c = ops::cast(random_tensor(sc, DType::f32, 13, 0, 2), DType::u8);  // 0 or 1
      Tensor a = random_tensor(sa, dt, 14, 1, 9), b = random_tensor(sb, dt, 15, 1, 9);
      if (is_floating(dt) && a.numel() > 1) a.narrow0(0, 1).fill_(-std::numeric_limits<double>::infinity());
      Tensor want = Tensor::empty(so, dt), got = Tensor::empty(so, dt, dev());
      kernels::where(kCPU)(c, a, b, want);
      kernels::where(dev())(c.to(dev()), a.to(dev()), b.to(dev()), got);
      expect_close(got, want, 0, std::string(dtype_name(dt)) + " where " + shape_str(sc) + shape_str(sa) + shape_str(sb));
    }
}

TEST_P(ElementwiseOps, MisalignedOperandsTakeTheScalarPath) {
  Tensor a = random_tensor({1001}, DType::f32, 5), b = random_tensor({1001}, DType::f32, 6);
  Tensor da = a.to(dev()).narrow0(1, 999), db = b.to(dev()).narrow0(2, 999);
  Tensor want = Tensor::empty({999}, DType::f32), got = Tensor::empty({999}, DType::f32, dev());
  kernels::binary(kCPU)(BinaryOp::Mul, a.narrow0(1, 999), b.narrow0(2, 999), want);
  kernels::binary(dev())(BinaryOp::Mul, da, db, got);
  expect_close(got, want, 0);
}

const std::vector<UnaryOp>& all_unary() {
  static const std::vector<UnaryOp> ops{UnaryOp::AddScalar, UnaryOp::MulScalar, UnaryOp::RsubScalar, UnaryOp::Pow,
                                        UnaryOp::Neg,       UnaryOp::Exp,       UnaryOp::Log,        UnaryOp::Sqrt,
                                        UnaryOp::Relu,      UnaryOp::GeluErf,   UnaryOp::GeluTanh,   UnaryOp::Tanh,
                                        UnaryOp::Sigmoid};
  return ops;
}

TEST_P(ElementwiseOps, UnaryAndBackwardMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (UnaryOp op : all_unary())
      for (double alpha : {2.0, 0.5})
        for (int64_t n : edge_sizes()) {
          // Positive inputs where the op needs them (log, sqrt, fractional pow).
          const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Pow;
          Tensor x = random_tensor({n}, dt, 21, positive ? 0.1 : -3, 3);
          Tensor gy = random_tensor({n}, dt, 22);
          Tensor y = Tensor::empty({n}, dt), dy = Tensor::empty({n}, dt, dev());
          kernels::unary(kCPU)(op, x, y, alpha);
          kernels::unary(dev())(op, x.to(dev()), dy, alpha);
          std::string what = std::string(dtype_name(dt)) + " unary " + std::to_string(int(op)) + " n=" + std::to_string(n);
          // SIM: the same libm, so exact; a GPU's exp/erf/tanh are within a few ulps. f32 GELU (tanh
          // form) on the CPU goes through Eigen's vectorised tanh, not libm's: a few ulps there too.
          const bool cpu_own_tanh = op == UnaryOp::GeluTanh && dt == DType::f32;
          const double rtol = cpu_own_tanh ? 4 * ulps(dt) : tol(0, 4 * ulps(dt));
          expect_close(dy, y, rtol, what);
          Tensor gx = Tensor::empty({n}, dt), dgx = Tensor::empty({n}, dt, dev());
          kernels::unary_backward(kCPU)(op, gy, x, y, gx, alpha);
          kernels::unary_backward(dev())(op, gy.to(dev()), x.to(dev()), dy, dgx, alpha);
          expect_close(dgx, gx, rtol, what + " backward");
        }
}

TEST_P(ElementwiseOps, IntegerScalarOpsMatchCpu) {
  for (DType dt : {DType::i32, DType::i64, DType::u8})
    for (UnaryOp op : {UnaryOp::AddScalar, UnaryOp::MulScalar, UnaryOp::RsubScalar, UnaryOp::Neg})
      for (int64_t n : {0, 1, 33, 1000}) {
        Tensor x = random_tensor({n}, dt, 3, 0, 200);
        Tensor y = Tensor::empty({n}, dt), dy = Tensor::empty({n}, dt, dev());
        kernels::unary(kCPU)(op, x, y, 3.0);
        kernels::unary(dev())(op, x.to(dev()), dy, 3.0);
        expect_close(dy, y, 0, dtype_name(dt));
      }
}

TANDEM_BACKEND_SUITE(ElementwiseOps);

}  // namespace
}  // namespace tandem::testing
