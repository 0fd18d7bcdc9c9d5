// CPU elementwise kernels: broadcasting binary ops, unary/scalar ops and their fused backward.
// One dtype/op dispatch per call, then tight loops over contiguous runs that g++ vectorises.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/eigen.h"
#include "kernels/cpu/gelu.h"
#include "runtime/backend/elementwise.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements; below this a loop stays on one thread
constexpr int64_t kChunk = 1 << 13;

// Runs f(begin, end) over [0, n) in chunks, on OpenMP threads when n is large. Chunks write
// disjoint outputs, so results do not depend on the thread count.
template <class F>
void parallel_chunks(int64_t n, F&& f) {
  if (n < kParallelMin) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}

template <class T> using A = acc_t<T>;

struct AddF { template <class X> X operator()(X a, X b) const { return a + b; } };
struct SubF { template <class X> X operator()(X a, X b) const { return a - b; } };
struct MulF { template <class X> X operator()(X a, X b) const { return a * b; } };
struct DivF { template <class X> X operator()(X a, X b) const { return a / b; } };

// out[i] = f(a[i * sa], b[i * sb]) for i < n; the common stride pairs get their own loops so
// that each one vectorises.
template <class T, class F>
inline void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, T* out, int64_t n, F f) {
  using X = A<T>;
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = T(f(X(a[i]), X(b[i])));
  } else if (sa == 1 && sb == 0) {
    const X bv = X(b[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = T(f(X(a[i]), bv));
  } else if (sa == 0 && sb == 1) {
    const X av = X(a[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = T(f(av, X(b[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = T(f(X(a[i * sa]), X(b[i * sb])));
  }
}

template <class T, class F>
void binary_typed(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  BroadcastPlan plan = broadcast_plan(out.shape(), {out.shape(), a.shape(), b.shape()});
  const size_t r = plan.sizes.size();
  const int64_t inner = plan.sizes[r - 1];
  const int64_t sa = plan.strides[1][r - 1], sb = plan.strides[2][r - 1];
  if (r == 1) {  // one run: same shapes, or a scalar operand
    parallel_chunks(inner, [&](int64_t lo, int64_t hi) {
      binary_run(pa + lo * sa, sa, pb + lo * sb, sb, po + lo, hi - lo, f);
    });
    return;
  }
  const int64_t rows = total / inner;
  auto row_range = [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      // Offsets of row q: decompose it over the outer dims.
      int64_t rem = q, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        int64_t i = rem % plan.sizes[d];
        rem /= plan.sizes[d];
        oa += i * plan.strides[1][d];
        ob += i * plan.strides[2][d];
      }
      binary_run(pa + oa, sa, pb + ob, sb, po + q * inner, inner, f);
    }
  };
  if (total < kParallelMin) {
    row_range(0, rows);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < rows; ++q) row_range(q, q + 1);
  }
}

void cpu_binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case BinaryOp::Add: return binary_typed<T>(a, b, out, AddF{});
      case BinaryOp::Sub: return binary_typed<T>(a, b, out, SubF{});
      case BinaryOp::Mul: return binary_typed<T>(a, b, out, MulF{});
      case BinaryOp::Div: return binary_typed<T>(a, b, out, DivF{});
    }
  }, "binary");
}

// ---- unary ----

template <class T, class F>
void map1(const Tensor& x, Tensor& y, F f) {
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(y.data_ptr());
  parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) py[i] = T(f(A<T>(px[i])));
  });
}

template <class T, class F>
void map2(const Tensor& g, const Tensor& s, Tensor& out, F f) {
  const T* pg = static_cast<const T*>(g.data_ptr());
  const T* ps = s.defined() ? static_cast<const T*>(s.data_ptr()) : nullptr;
  T* po = static_cast<T*>(out.data_ptr());
  parallel_chunks(g.numel(), [&](int64_t lo, int64_t hi) {
    if (ps) {
      for (int64_t i = lo; i < hi; ++i) po[i] = T(f(A<T>(pg[i]), A<T>(ps[i])));
    } else {
      for (int64_t i = lo; i < hi; ++i) po[i] = T(f(A<T>(pg[i]), A<T>(0)));
    }
  });
}

template <class X> constexpr X kInvSqrt2 = X(0.70710678118654752440);
template <class X> constexpr X kInvSqrt2Pi = X(0.39894228040143267794);

// GELU (tanh form) over a tensor in f32 chunks. g == nullptr: forward; else the input gradient for g.
void gelu_tanh_tensor_f32(const Tensor& x, const Tensor* g, Tensor& out) {
  const float* px = static_cast<const float*>(x.data_ptr());
  const float* pg = g ? static_cast<const float*>(g->data_ptr()) : nullptr;
  float* po = static_cast<float*>(out.data_ptr());
  parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    kernels::gelu_tanh_f32(px + lo, pg ? pg + lo : nullptr, po + lo, hi - lo);
  });
}

template <class T>
void unary_float(UnaryOp op, const Tensor& x, Tensor& y, double alpha) {
  using X = A<T>;
  const X al = X(alpha);
  switch (op) {
    case UnaryOp::AddScalar: return map1<T>(x, y, [al](X v) { return v + al; });
    case UnaryOp::MulScalar: return map1<T>(x, y, [al](X v) { return v * al; });
    case UnaryOp::RsubScalar: return map1<T>(x, y, [al](X v) { return al - v; });
    case UnaryOp::Neg: return map1<T>(x, y, [](X v) { return -v; });
    case UnaryOp::Pow:
      if (alpha == 2.0) return map1<T>(x, y, [](X v) { return v * v; });
      return map1<T>(x, y, [al](X v) { return std::pow(v, al); });
    case UnaryOp::Exp: return map1<T>(x, y, [](X v) { return std::exp(v); });
    case UnaryOp::Log: return map1<T>(x, y, [](X v) { return std::log(v); });
    case UnaryOp::Sqrt: return map1<T>(x, y, [](X v) { return std::sqrt(v); });
    case UnaryOp::Relu: return map1<T>(x, y, [](X v) { return v < X(0) ? X(0) : v; });  // NaN stays NaN
    case UnaryOp::GeluErf:
      return map1<T>(x, y, [](X v) { return X(0.5) * v * (X(1) + std::erf(v * kInvSqrt2<X>)); });
    case UnaryOp::GeluTanh:
      if constexpr (std::is_same_v<T, float>) return gelu_tanh_tensor_f32(x, nullptr, y);
      return map1<T>(x, y, [](X v) { return gelu_tanh(v); });
    case UnaryOp::Tanh: return map1<T>(x, y, [](X v) { return std::tanh(v); });
    case UnaryOp::Sigmoid: return map1<T>(x, y, [](X v) { return X(1) / (X(1) + std::exp(-v)); });
  }
}

template <class T>
void unary_int(UnaryOp op, const Tensor& x, Tensor& y, double alpha) {
  const T al = T(alpha);
  switch (op) {
    case UnaryOp::AddScalar: return map1<T>(x, y, [al](T v) { return T(v + al); });
    case UnaryOp::MulScalar: return map1<T>(x, y, [al](T v) { return T(v * al); });
    case UnaryOp::RsubScalar: return map1<T>(x, y, [al](T v) { return T(al - v); });
    case UnaryOp::Neg: return map1<T>(x, y, [](T v) { return T(-v); });
    default:
      TANDEM_FAIL(NotSupported, "unary op {} needs a floating dtype, got {}", int(op), dtype_name(x.dtype()));
  }
}

void cpu_unary(UnaryOp op, const Tensor& x, Tensor& y, double alpha) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) unary_int<T>(op, x, y, alpha);
    else unary_float<T>(op, x, y, alpha);
  }, "unary");
}

template <class T>
void unary_backward_float(UnaryOp op, const Tensor& gy, const Tensor& x, const Tensor& y, Tensor& gx,
                          double alpha) {
  using X = A<T>;
  const X al = X(alpha);
  switch (op) {
    case UnaryOp::AddScalar: return map2<T>(gy, Tensor(), gx, [](X g, X) { return g; });
    case UnaryOp::MulScalar: return map2<T>(gy, Tensor(), gx, [al](X g, X) { return g * al; });
    case UnaryOp::RsubScalar:
    case UnaryOp::Neg: return map2<T>(gy, Tensor(), gx, [](X g, X) { return -g; });
    case UnaryOp::Pow:
      if (alpha == 0.0) return map2<T>(gy, Tensor(), gx, [](X, X) { return X(0); });
      if (alpha == 2.0) return map2<T>(gy, x, gx, [](X g, X v) { return g * X(2) * v; });
      return map2<T>(gy, x, gx, [al](X g, X v) { return g * al * std::pow(v, al - X(1)); });
    case UnaryOp::Log: return map2<T>(gy, x, gx, [](X g, X v) { return g / v; });
    case UnaryOp::GeluErf:
      return map2<T>(gy, x, gx, [](X g, X v) {
        X cdf = X(0.5) * (X(1) + std::erf(v * kInvSqrt2<X>));
        X pdf = kInvSqrt2Pi<X> * std::exp(X(-0.5) * v * v);
        return g * (cdf + v * pdf);
      });
    case UnaryOp::GeluTanh:
      if constexpr (std::is_same_v<T, float>) return gelu_tanh_tensor_f32(x, &gy, gx);
      return map2<T>(gy, x, gx, [](X g, X v) { return gelu_tanh_grad(g, v); });
    case UnaryOp::Exp: return map2<T>(gy, y, gx, [](X g, X o) { return g * o; });
    case UnaryOp::Sqrt: return map2<T>(gy, y, gx, [](X g, X o) { return g / (X(2) * o); });
    case UnaryOp::Relu: return map2<T>(gy, y, gx, [](X g, X o) { return o > X(0) ? g : X(0); });
    case UnaryOp::Tanh: return map2<T>(gy, y, gx, [](X g, X o) { return g * (X(1) - o * o); });
    case UnaryOp::Sigmoid: return map2<T>(gy, y, gx, [](X g, X o) { return g * o * (X(1) - o); });
  }
}

void cpu_unary_backward(UnaryOp op, const Tensor& gy, const Tensor& x, const Tensor& y, Tensor& gx,
                        double alpha) {
  dispatch_floating(gy.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    unary_backward_float<T>(op, gy, x, y, gx, alpha);
  });
}

// Row by row over the broadcast plan (the innermost dim a run, as binary_typed); rows in parallel
// write disjoint outputs.
template <class T>
void where_typed(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const uint8_t* pc = static_cast<const uint8_t*>(cond.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const BroadcastPlan plan = broadcast_plan(out.shape(), {cond.shape(), a.shape(), b.shape()});
  const size_t r = plan.sizes.size();
  const int64_t inner = plan.sizes[r - 1];
  const int64_t sc = plan.strides[0][r - 1], sa = plan.strides[1][r - 1], sb = plan.strides[2][r - 1];
  auto row_range = [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      int64_t rem = q, oc = 0, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % plan.sizes[d];
        rem /= plan.sizes[d];
        oc += i * plan.strides[0][d];
        oa += i * plan.strides[1][d];
        ob += i * plan.strides[2][d];
      }
      T* o = po + q * inner;
      for (int64_t i = 0; i < inner; ++i) o[i] = pc[oc + i * sc] ? pa[oa + i * sa] : pb[ob + i * sb];
    }
  };
  const int64_t rows = total / inner;
  if (total < kParallelMin) {
    row_range(0, rows);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < rows; ++q) row_range(q, q + 1);
  }
}

void cpu_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  TANDEM_CHECK(cond.dtype() == DType::u8, "where: the condition is {}, not u8", dtype_name(cond.dtype()));
  TANDEM_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "where: dtypes {} {} -> {} differ",
               dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  dispatch(out.dtype(), [&](auto tag) { where_typed<decltype(tag)>(cond, a, b, out); }, "where");
}

TANDEM_REGISTER_KERNEL(binary, DeviceKind::CPU, cpu_binary);
TANDEM_REGISTER_KERNEL(where, DeviceKind::CPU, cpu_where);
TANDEM_REGISTER_KERNEL(unary, DeviceKind::CPU, cpu_unary);
TANDEM_REGISTER_KERNEL(unary_backward, DeviceKind::CPU, cpu_unary_backward);

}  // namespace
}  // namespace tandem::kernels
