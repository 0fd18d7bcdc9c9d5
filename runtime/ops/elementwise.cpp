// Elementwise op entries: validate, allocate, call the backend's kernel, record a backward closure
// that captures only what it reads.
#include "runtime/ops/elementwise.h"

#include "runtime/autograd.h"
#include "runtime/backend/core.h"
#include "runtime/backend/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/shape.h"

namespace tandem::ops {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;
using kernels::UnarySaves;

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(kernels::broadcast_shapes(a.shape(), b.shape(), kernels::binary_op_name(op)),
                             a.dtype(), a.device());
  kernels::binary(a.device())(op, a, b, out);
  return out;
}

// PyTorch's promotion among floating dtypes: the wider one wins; f16 with bf16 gives f32. Lets
// autocast outputs (f16/bf16) meet f32 tensors in elementwise ops.
DType promote_floating(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;
}

// wide + narrow (a narrower floating dtype, same shape and device) in one pass, the
// narrow one widened as it is read: the residual stream (f32) plus an autocast branch's output
// (bf16) without a cast launch and an f32 copy of the branch. The values of the cast-then-add path;
// each gradient comes back in its input's dtype, as that path's.
Tensor add_widening(const Tensor& wide, const Tensor& narrow) {
  Tensor out = Tensor::empty(wide.shape(), wide.dtype(), wide.device());
  kernels::axpy_out(wide.device())(wide, narrow, 1.0, out);
  if (!needs_grad({&wide, &narrow})) return out;
  const bool gw = wide.requires_grad(), gn = narrow.requires_grad();
  const DType nd = narrow.dtype();
  return record("AddBackward", {wide, narrow}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {gw ? g[0] : Tensor(), gn ? cast(g[0], nd) : Tensor()};
  });
}

Tensor binary_entry(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  const char* name = kernels::binary_op_name(op);
  detail::check_defined(a_in, name, "a");
  detail::check_defined(b_in, name, "b");
  Tensor a = a_in, b = b_in;
  if (op == BinaryOp::Add && a.dtype() != b.dtype() && is_floating(a.dtype()) && is_floating(b.dtype()) &&
      a.shape() == b.shape() && a.device() == b.device()) {
    const DType t = promote_floating(a.dtype(), b.dtype());
    if (t == a.dtype()) return add_widening(a, b);
    if (t == b.dtype()) return add_widening(b, a);  // addition commutes exactly
  }
  if (a.dtype() != b.dtype() && is_floating(a.dtype()) && is_floating(b.dtype())) {
    const DType t = promote_floating(a.dtype(), b.dtype());
    a = cast(a, t);  // differentiable: gradients come back in each input's own dtype
    b = cast(b, t);
  }
  detail::check_compatible(name, a, b);
  TANDEM_CHECK(is_floating(a.dtype()) ||
                   (op != BinaryOp::Div && (a.dtype() == DType::i32 || a.dtype() == DType::i64)),
               "{}: dtype {} is not supported (div needs a floating dtype; add/sub/mul take i32/i64 too)", name,
               detail::describe(a));
  Tensor out = run_binary(op, a, b);
  if (!needs_grad({&a, &b})) return out;

  const bool ga = a.requires_grad(), gb = b.requires_grad();
  const Shape sa = a.shape(), sb = b.shape();
  switch (op) {
    case BinaryOp::Add:
      return record("AddBackward", {a, b}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
        return {ga ? detail::sum_to_shape(g[0], sa) : Tensor(), gb ? detail::sum_to_shape(g[0], sb) : Tensor()};
      });
    case BinaryOp::Sub:
      return record("SubBackward", {a, b}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
        return {ga ? detail::sum_to_shape(g[0], sa) : Tensor(), gb ? neg(detail::sum_to_shape(g[0], sb)) : Tensor()};
      });
    case BinaryOp::Mul: {
      Tensor a_saved = gb ? a.detach() : Tensor(), b_saved = ga ? b.detach() : Tensor();
      return record("MulBackward", {a, b}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
        return {ga ? detail::sum_to_shape(run_binary(BinaryOp::Mul, g[0], b_saved), sa) : Tensor(),
                gb ? detail::sum_to_shape(run_binary(BinaryOp::Mul, g[0], a_saved), sb) : Tensor()};
      });
    }
    case BinaryOp::Div: {
      // d/da = g / b; d/db = -g a / b^2 = -(g / b) * out.
      Tensor b_saved = b.detach(), out_saved = gb ? out.detach() : Tensor();
      return record("DivBackward", {a, b}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
        Tensor g_over_b = run_binary(BinaryOp::Div, g[0], b_saved);
        Tensor gb_full = gb ? neg(run_binary(BinaryOp::Mul, g_over_b, out_saved)) : Tensor();
        return {ga ? detail::sum_to_shape(g_over_b, sa) : Tensor(), gb ? detail::sum_to_shape(gb_full, sb) : Tensor()};
      });
    }
  }
  return out;
}

Tensor unary_entry(UnaryOp op, const char* name, const Tensor& x, double alpha, bool integer_ok = false) {
  detail::check_defined(x, name, "a");
  if (!integer_ok) detail::check_floating(name, x);
  TANDEM_CHECK(x.dtype() != DType::u8, "{}: dtype u8 is not supported ({})", name, detail::describe(x));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels::unary(x.device())(op, x, y, alpha);
  if (!needs_grad({&x})) return y;
  if (op == UnaryOp::AddScalar)
    return record("AddScalarBackward", {x}, y, [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  UnarySaves saves = kernels::unary_saves(op);
  Tensor x_saved = saves == UnarySaves::Input ? x.detach() : Tensor();
  Tensor y_saved = saves == UnarySaves::Output ? y.detach() : Tensor();
  std::string node_name = std::string(name) + "Backward";
  return record(node_name.c_str(), {x}, y, [=](const std::vector<Tensor>& g) {
    Tensor gx = Tensor::empty(g[0].shape(), g[0].dtype(), g[0].device());
    kernels::unary_backward(g[0].device())(op, g[0], x_saved, y_saved, gx, alpha);
    return std::vector<Tensor>{gx};
  });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_entry(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_entry(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_entry(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_entry(BinaryOp::Div, a, b); }

Tensor add(const Tensor& a, double s) { return unary_entry(UnaryOp::AddScalar, "add", a, s, true); }
Tensor mul(const Tensor& a, double s) { return unary_entry(UnaryOp::MulScalar, "mul", a, s, true); }
Tensor rsub(double s, const Tensor& a) { return unary_entry(UnaryOp::RsubScalar, "rsub", a, s, true); }
Tensor neg(const Tensor& a) { return unary_entry(UnaryOp::Neg, "neg", a, 0.0, true); }
Tensor pow(const Tensor& a, double exponent) { return unary_entry(UnaryOp::Pow, "pow", a, exponent); }
Tensor exp(const Tensor& a) { return unary_entry(UnaryOp::Exp, "exp", a, 0.0); }
Tensor log(const Tensor& a) { return unary_entry(UnaryOp::Log, "log", a, 0.0); }
Tensor sqrt(const Tensor& a) { return unary_entry(UnaryOp::Sqrt, "sqrt", a, 0.0); }
Tensor relu(const Tensor& a) { return unary_entry(UnaryOp::Relu, "relu", a, 0.0); }
Tensor gelu(const Tensor& a, bool tanh_approximation) {
  return unary_entry(tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::GeluErf, "gelu", a, 0.0);
}
Tensor tanh(const Tensor& a) { return unary_entry(UnaryOp::Tanh, "tanh", a, 0.0); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined(cond, "where", "cond");
  detail::check_compatible("where", a, b);
  TANDEM_CHECK(cond.dtype() == DType::u8, "where: the condition must be u8 (nonzero is true), got {}",
               detail::describe(cond));
  TANDEM_CHECK(cond.device() == a.device(), "where: device mismatch: condition {} vs {}", detail::describe(cond),
               detail::describe(a));
  const Shape shape = kernels::broadcast_shapes(kernels::broadcast_shapes(cond.shape(), a.shape(), "where"),
                                                b.shape(), "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  kernels::where(a.device())(cond, a, b, out);
  if (!needs_grad({&a, &b})) return out;
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  const Shape sa = a.shape(), sb = b.shape();
  const Tensor c = cond.detach();
  return record("WhereBackward", {a, b}, out, [=](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    // The gradient goes through the same select, with zeros for the branch not taken.
    const Tensor zero = Tensor::zeros({}, g[0].dtype(), g[0].device());
    auto routed = [&](bool to_a) {
      Tensor r = Tensor::empty(g[0].shape(), g[0].dtype(), g[0].device());
      kernels::where(g[0].device())(c, to_a ? g[0] : zero, to_a ? zero : g[0], r);
      return detail::sum_to_shape(r, to_a ? sa : sb);
    };
    return {ga ? routed(true) : Tensor(), gb ? routed(false) : Tensor()};
  });
}
Tensor sigmoid(const Tensor& a) { return unary_entry(UnaryOp::Sigmoid, "sigmoid", a, 0.0); }

}  // namespace tandem::ops
