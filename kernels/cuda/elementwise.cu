// Elementwise kernels of the CUDA backend: broadcasting binary ops, unary/scalar ops and their fused
// backward. Contiguous operands take 16-byte packed loads; broadcasting walks a coalesced plan.
// Math in acc_t<T>, with the same formulas as kernels/cpu/elementwise.cpp.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.cuh"
#include "runtime/backend/elementwise.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

using kernels::BinaryOp;
using kernels::BroadcastPlan;
using kernels::UnaryOp;
using kernels::UnarySaves;

constexpr int kMaxDims = 8;

// A BroadcastPlan over (out, a, b) flattened into kernel arguments.
struct Plan2 {
  int rank;
  int64_t size[kMaxDims];
  int64_t sa[kMaxDims];
  int64_t sb[kMaxDims];
};

// y[i] = f(x[i]) (and y[i] = f(x[i], s[i]) with S); Vec: all pointers 16-byte aligned.
template <class T, bool Vec, class F>
__global__ void map1_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, F f) {
  int64_t start = 0;
  if (Vec) {
    constexpr int V = kPackWidth<T>;
    const int64_t packs = n / V;
    const Pack<T, V>* xp = reinterpret_cast<const Pack<T, V>*>(x);
    Pack<T, V>* yp = reinterpret_cast<Pack<T, V>*>(y);
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      Pack<T, V> in = xp[i], out;
      for (int k = 0; k < V; ++k) out.v[k] = from_acc<T>(f(to_acc(in.v[k])));
      yp[i] = out;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads()) y[i] = from_acc<T>(f(to_acc(x[i])));
}

template <class T, bool Vec, class F>
__global__ void map2_kernel(const T* __restrict__ g, const T* __restrict__ s, T* __restrict__ out, int64_t n, F f) {
  using X = acc_t<T>;
  int64_t start = 0;
  if (Vec) {
    constexpr int V = kPackWidth<T>;
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      Pack<T, V> gv = reinterpret_cast<const Pack<T, V>*>(g)[i], o;
      Pack<T, V> sv = gv;
      if (s) sv = reinterpret_cast<const Pack<T, V>*>(s)[i];
      for (int k = 0; k < V; ++k) o.v[k] = from_acc<T>(f(to_acc(gv.v[k]), s ? to_acc(sv.v[k]) : X(0)));
      reinterpret_cast<Pack<T, V>*>(out)[i] = o;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads())
    out[i] = from_acc<T>(f(to_acc(g[i]), s ? to_acc(s[i]) : X(0)));
}

template <class T, class F>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n,
                              Plan2 p, F f) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t idx = rem % p.size[d];
      rem /= p.size[d];
      oa += idx * p.sa[d];
      ob += idx * p.sb[d];
    }
    out[i] = from_acc<T>(f(to_acc(a[oa]), to_acc(b[ob])));
  }
}

// out[i] = cond[i] ? a[i] : b[i] over a broadcast plan (operands 0, 1, 2 = cond, a, b).
struct Plan3 {
  int rank;
  int64_t size[kMaxDims];
  int64_t stride[3][kMaxDims];
};

template <class T>
__global__ void where_kernel(const uint8_t* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out, int64_t n, Plan3 p) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t rem = i, oc = 0, oa = 0, ob = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t idx = rem % p.size[d];
      rem /= p.size[d];
      oc += idx * p.stride[0][d];
      oa += idx * p.stride[1][d];
      ob += idx * p.stride[2][d];
    }
    out[i] = c[oc] ? a[oa] : b[ob];
  }
}

// Same shapes: a packed map over both operands.
template <class T, bool Vec, class F>
__global__ void binary_same_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n, F f) {
  int64_t start = 0;
  if (Vec) {
    constexpr int V = kPackWidth<T>;
    const int64_t packs = n / V;
    for (int64_t i = global_thread(); i < packs; i += grid_threads()) {
      Pack<T, V> av = reinterpret_cast<const Pack<T, V>*>(a)[i], bv = reinterpret_cast<const Pack<T, V>*>(b)[i], o;
      for (int k = 0; k < V; ++k) o.v[k] = from_acc<T>(f(to_acc(av.v[k]), to_acc(bv.v[k])));
      reinterpret_cast<Pack<T, V>*>(out)[i] = o;
    }
    start = packs * V;
  }
  for (int64_t i = start + global_thread(); i < n; i += grid_threads()) out[i] = from_acc<T>(f(to_acc(a[i]), to_acc(b[i])));
}

// The result type of op on acc types: integers keep their type (u8 wraps as on the CPU).
struct AddF { template <class X> __host__ __device__ X operator()(X a, X b) const { return X(a + b); } };
struct SubF { template <class X> __host__ __device__ X operator()(X a, X b) const { return X(a - b); } };
struct MulF { template <class X> __host__ __device__ X operator()(X a, X b) const { return X(a * b); } };
struct DivF { template <class X> __host__ __device__ X operator()(X a, X b) const { return a / b; } };

template <class X> constexpr double kInvSqrt2 = 0.70710678118654752440;
template <class X> constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// One functor for every unary op: op picked at run time inside the kernel would diverge nowhere
// (uniform), but separate instantiations keep each kernel small.
template <UnaryOp Op, class X>
struct UnaryF {
  X al;
  __device__ X operator()(X v) const {
    if constexpr (Op == UnaryOp::AddScalar) return X(v + al);
    else if constexpr (Op == UnaryOp::MulScalar) return X(v * al);
    else if constexpr (Op == UnaryOp::RsubScalar) return X(al - v);
    else if constexpr (Op == UnaryOp::Neg) return X(-v);
    else if constexpr (Op == UnaryOp::Pow) return al == X(2) ? v * v : std::pow(v, al);
    else if constexpr (Op == UnaryOp::Exp) return std::exp(v);
    else if constexpr (Op == UnaryOp::Log) return std::log(v);
    else if constexpr (Op == UnaryOp::Sqrt) return std::sqrt(v);
    else if constexpr (Op == UnaryOp::Relu) return v < X(0) ? X(0) : v;
    else if constexpr (Op == UnaryOp::GeluErf) return X(0.5) * v * (X(1) + std::erf(v * X(kInvSqrt2<X>)));
    else if constexpr (Op == UnaryOp::GeluTanh) return gelu_tanh(v);
    else if constexpr (Op == UnaryOp::Tanh) return std::tanh(v);
    else return X(1) / (X(1) + std::exp(-v));  // Sigmoid
  }
};

template <UnaryOp Op, class X>
struct UnaryBackF {
  X al;
  __device__ X operator()(X g, X v) const {  // v: x or y, as unary_saves(Op)
    if constexpr (Op == UnaryOp::AddScalar) return g;
    else if constexpr (Op == UnaryOp::MulScalar) return g * al;
    else if constexpr (Op == UnaryOp::RsubScalar || Op == UnaryOp::Neg) return -g;
    else if constexpr (Op == UnaryOp::Pow)
      return al == X(0) ? X(0) : (al == X(2) ? g * X(2) * v : g * al * std::pow(v, al - X(1)));
    else if constexpr (Op == UnaryOp::Log) return g / v;
    else if constexpr (Op == UnaryOp::GeluErf) {
      X cdf = X(0.5) * (X(1) + std::erf(v * X(kInvSqrt2<X>)));
      X pdf = X(kInvSqrt2Pi<X>) * std::exp(X(-0.5) * v * v);
      return g * (cdf + v * pdf);
    } else if constexpr (Op == UnaryOp::GeluTanh) {
      return gelu_tanh_grad(g, v);
    } else if constexpr (Op == UnaryOp::Exp) return g * v;
    else if constexpr (Op == UnaryOp::Sqrt) return g / (X(2) * v);
    else if constexpr (Op == UnaryOp::Relu) return v > X(0) ? g : X(0);
    else if constexpr (Op == UnaryOp::Tanh) return g * (X(1) - v * v);
    else return g * v * (X(1) - v);  // Sigmoid
  }
};

template <class T, class F>
void launch_map1(const Tensor& x, Tensor& y, F f) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(y.data_ptr());
  const unsigned grid = grid_for(n, kBlock * kPackWidth<T>);
  if (aligned16(px) && aligned16(py))
    TANDEM_LAUNCH(map1_kernel<T, true, F>, grid, kBlock, 0, stream_for(x.device()), px, py, n, f);
  else
    TANDEM_LAUNCH(map1_kernel<T, false, F>, grid, kBlock, 0, stream_for(x.device()), px, py, n, f);
}

template <class T, class F>
void launch_map2(const Tensor& g, const Tensor& s, Tensor& out, F f) {
  const int64_t n = g.numel();
  if (n == 0) return;
  const T* pg = static_cast<const T*>(g.data_ptr());
  const T* ps = s.defined() ? static_cast<const T*>(s.data_ptr()) : nullptr;
  T* po = static_cast<T*>(out.data_ptr());
  const unsigned grid = grid_for(n, kBlock * kPackWidth<T>);
  if (aligned16(pg) && (!ps || aligned16(ps)) && aligned16(po))
    TANDEM_LAUNCH(map2_kernel<T, true, F>, grid, kBlock, 0, stream_for(g.device()), pg, ps, po, n, f);
  else
    TANDEM_LAUNCH(map2_kernel<T, false, F>, grid, kBlock, 0, stream_for(g.device()), pg, ps, po, n, f);
}

template <class T, class F>
void binary_typed(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  Stream stream = stream_for(out.device());
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    const unsigned grid = grid_for(n, kBlock * kPackWidth<T>);
    if (aligned16(pa) && aligned16(pb) && aligned16(po))
      TANDEM_LAUNCH(binary_same_kernel<T, true, F>, grid, kBlock, 0, stream, pa, pb, po, n, f);
    else
      TANDEM_LAUNCH(binary_same_kernel<T, false, F>, grid, kBlock, 0, stream, pa, pb, po, n, f);
    return;
  }
  BroadcastPlan plan = kernels::broadcast_plan(out.shape(), {out.shape(), a.shape(), b.shape()});
  TANDEM_CHECK(plan.sizes.size() <= kMaxDims, "binary: {} broadcast dims exceed the CUDA backend's {}",
               plan.sizes.size(), kMaxDims);
  Plan2 p{};
  p.rank = static_cast<int>(plan.sizes.size());
  for (int d = 0; d < p.rank; ++d) {
    p.size[d] = plan.sizes[d];
    p.sa[d] = plan.strides[1][d];
    p.sb[d] = plan.strides[2][d];
  }
  TANDEM_LAUNCH(binary_kernel<T, F>, grid_for(n, kBlock), kBlock, 0, stream, pa, pb, po, n, p, f);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  check_on_device("binary", out.device(), {&a, &b, &out});
  TANDEM_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "binary: dtypes {} {} -> {} differ",
               dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case BinaryOp::Add: return binary_typed<T>(a, b, out, AddF{});
      case BinaryOp::Sub: return binary_typed<T>(a, b, out, SubF{});
      case BinaryOp::Mul: return binary_typed<T>(a, b, out, MulF{});
      case BinaryOp::Div:
        if constexpr (std::is_integral_v<T>)
          TANDEM_FAIL(NotSupported, "binary div needs a floating dtype, got {}", dtype_name(out.dtype()));
        else return binary_typed<T>(a, b, out, DivF{});
    }
  }, "binary");
}

template <class T, template <UnaryOp, class> class Fn, class Call>
void with_unary(UnaryOp op, double alpha, Call&& call) {
  using X = acc_t<T>;
  const X al = static_cast<X>(alpha);
  switch (op) {
#define TANDEM_UNARY_CASE(name) \
  case UnaryOp::name: return call(Fn<UnaryOp::name, X>{al});
    TANDEM_UNARY_CASE(AddScalar) TANDEM_UNARY_CASE(MulScalar) TANDEM_UNARY_CASE(RsubScalar)
    TANDEM_UNARY_CASE(Pow) TANDEM_UNARY_CASE(Neg) TANDEM_UNARY_CASE(Exp) TANDEM_UNARY_CASE(Log)
    TANDEM_UNARY_CASE(Sqrt) TANDEM_UNARY_CASE(Relu) TANDEM_UNARY_CASE(GeluErf) TANDEM_UNARY_CASE(GeluTanh)
    TANDEM_UNARY_CASE(Tanh) TANDEM_UNARY_CASE(Sigmoid)
#undef TANDEM_UNARY_CASE
  }
}

void unary(UnaryOp op, const Tensor& x, Tensor& y, double alpha) {
  check_on_device("unary", x.device(), {&x, &y});
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T al = static_cast<T>(alpha);
      switch (op) {
        case UnaryOp::AddScalar: return launch_map1<T>(x, y, UnaryF<UnaryOp::AddScalar, T>{al});
        case UnaryOp::MulScalar: return launch_map1<T>(x, y, UnaryF<UnaryOp::MulScalar, T>{al});
        case UnaryOp::RsubScalar: return launch_map1<T>(x, y, UnaryF<UnaryOp::RsubScalar, T>{al});
        case UnaryOp::Neg: return launch_map1<T>(x, y, UnaryF<UnaryOp::Neg, T>{al});
        default:
          TANDEM_FAIL(NotSupported, "unary op {} needs a floating dtype, got {}", int(op), dtype_name(x.dtype()));
      }
    } else {
      with_unary<T, UnaryF>(op, alpha, [&](auto f) { launch_map1<T>(x, y, f); });
    }
  }, "unary");
}

void unary_backward(UnaryOp op, const Tensor& gy, const Tensor& x, const Tensor& y, Tensor& gx, double alpha) {
  check_on_device("unary_backward", gy.device(), {&gy, &x, &y, &gx});
  const UnarySaves saves = kernels::unary_saves(op);
  const Tensor none;
  const Tensor& s = saves == UnarySaves::Input ? x : saves == UnarySaves::Output ? y : none;
  TANDEM_CHECK(saves == UnarySaves::None || s.defined(), "unary_backward: op {} needs its saved {}", int(op),
               saves == UnarySaves::Input ? "input" : "output");
  dispatch_floating(gy.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<acc_t<T>>)  // dispatch_floating rejects the rest at run time
      with_unary<T, UnaryBackF>(op, alpha, [&](auto f) { launch_map2<T>(gy, s, gx, f); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  check_on_device("where", out.device(), {&cond, &a, &b, &out});
  TANDEM_CHECK(cond.dtype() == DType::u8, "where: the condition is {}, not u8", dtype_name(cond.dtype()));
  TANDEM_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "where: dtypes {} {} -> {} differ",
               dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  const int64_t n = out.numel();
  if (n == 0) return;
  const BroadcastPlan plan = kernels::broadcast_plan(out.shape(), {cond.shape(), a.shape(), b.shape()});
  TANDEM_CHECK(plan.sizes.size() <= kMaxDims, "where: {} broadcast dims exceed the CUDA backend's {}",
               plan.sizes.size(), kMaxDims);
  Plan3 p{};
  p.rank = static_cast<int>(plan.sizes.size());
  for (int d = 0; d < p.rank; ++d) {
    p.size[d] = plan.sizes[d];
    for (int k = 0; k < 3; ++k) p.stride[k][d] = plan.strides[k][d];
  }
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(where_kernel<T>, grid_for(n, kBlock), kBlock, 0, stream_for(out.device()),
                  static_cast<const uint8_t*>(cond.data_ptr()), static_cast<const T*>(a.data_ptr()),
                  static_cast<const T*>(b.data_ptr()), static_cast<T*>(out.data_ptr()), n, p);
  }, "where");
}

TANDEM_REGISTER_KERNEL(kernels::binary, kKind, binary);
TANDEM_REGISTER_KERNEL(kernels::where, kKind, where);
TANDEM_REGISTER_KERNEL(kernels::unary, kKind, unary);
TANDEM_REGISTER_KERNEL(kernels::unary_backward, kKind, unary_backward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
