// CPU layer norm over x viewed as [M, D] (and the residual add fused before it). Statistics are
// accumulated in the statistics dtype (f64 for f64, f32 otherwise) in a fixed order, one row per
// OpenMP iteration, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/norm_params.h"
#include "runtime/backend/core.h"
#include "runtime/backend/norm.h"

namespace tandem::kernels {
namespace {

using cpu_norm::store;
using cpu_norm::vec;

// t += v (a parameter's .grad, in the statistics' dtype S).
template <class S>
void add_to(const std::vector<S>& v, Tensor& t, const char* what) {
  if (!t.defined()) return;
  TANDEM_CHECK(t.dtype() == dtype_v<S>, "layer_norm backward: {} added to must be {}, got {}", what,
               dtype_name(dtype_v<S>), dtype_name(t.dtype()));
  S* p = static_cast<S*>(t.data_ptr());
  for (size_t i = 0; i < v.size(); ++i) p[i] += v[i];
}

// A narrower y (f16/bf16 for f32 x) is computed in x's dtype and rounded once into y; a narrower dy
// is widened first. The CUDA kernels read and write them directly; the values are the same.
Tensor in_dtype_of(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor out = Tensor::empty(t.shape(), dt, t.device());
  convert_host(t.data_ptr(), t.dtype(), out.data_ptr(), dt, t.numel());
  return out;
}

// LayerNorm backward's row sums: a = sum g[d], b = sum g[d] * xhat[d] with g = dy * w and xhat =
// (x - mu) * r. Rows of S itself are read with 64-byte vector loads, as sum_of and sum_sq_dev read the
// forward's: lane_sum2's lambdas built each vector element by element (f32 [1024, 256], one thread:
// forward 290 -> 140 us, backward 390 -> 250 us). The same lanes and order as lane_sum2; f32 without
// AVX-512 in two ymm registers (lanes_avx2.h).
template <class S, class T>
inline void sum_g_gxhat(const T* dy, const S* w, const T* x, int64_t n, S mu, S r, S& a, S& b) {
  if constexpr (std::is_same_v<S, T>) {
    if constexpr (std::is_same_v<S, float>)
      if (avx2::lanes_usable()) return avx2::sum_g_gxhat_f32(dy, w, x, n, mu, r, a, b);
    constexpr int W = SumVec<S>::kWidth;
    typename SumVec<S>::type aa = {}, bb = {}, mv = {}, rv = {};
    mv += mu;
    rv += r;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const auto g = vload(dy + i) * vload(w + i);
      aa += g;
      bb += g * (vload(x + i) - mv) * rv;
    }
    a = hsum<S>(aa);
    b = hsum<S>(bb);
    for (; i < n; ++i) {
      const S g = dy[i] * w[i];
      a += g;
      b += g * (x[i] - mu) * r;
    }
  } else {
    lane_sum2<S>(
        n, [&](int64_t d) { return static_cast<S>(dy[d]) * w[d]; },
        [&](int64_t d) { return static_cast<S>(dy[d]) * w[d] * (static_cast<S>(x[d]) - mu) * r; }, a, b);
  }
}

void cpu_ln_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& y,
                    Tensor& mean, Tensor& rstd) {
  check_layer_norm_output_dtype("layer_norm", x.dtype(), y.dtype());
  if (y.dtype() != x.dtype()) {
    Tensor full = Tensor::empty(y.shape(), x.dtype(), y.device());
    cpu_ln_forward(x, weight, bias, eps, full, mean, rstd);
    convert_host(full.data_ptr(), full.dtype(), y.data_ptr(), y.dtype(), y.numel());
    return;
  }
  dispatch_norm_types(x.dtype(), "layer_norm", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    const int64_t M = mean.numel(), D = M ? x.numel() / M : 0;
    std::vector<S> w = vec<S>(weight, D, 1), b = vec<S>(bias, D, 0);
    std::vector<S> mv(static_cast<size_t>(M)), rv(static_cast<size_t>(M));
    const T* px = static_cast<const T*>(x.data_ptr());
    T* py = static_cast<T*>(y.data_ptr());
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
    for (int64_t m = 0; m < M; ++m) {
      const T* in = px + m * D;
      T* out = py + m * D;
      const S sum = sum_of<S>(in, D);
      const S mu = D ? sum / static_cast<S>(D) : S(0);
      const S sq = sum_sq_dev<S>(in, D, mu);
      const S r = S(1) / std::sqrt(sq / static_cast<S>(std::max<int64_t>(D, 1)) + static_cast<S>(eps));
      for (int64_t d = 0; d < D; ++d) out[d] = T((static_cast<S>(in[d]) - mu) * r * w[size_t(d)] + b[size_t(d)]);
      mv[size_t(m)] = mu;
      rv[size_t(m)] = r;
    }
    store(mv, mean);
    store(rv, rstd);
  });
}

// sum = x + branch (branch widened to x's dtype as it is read: the add's values), then the
// LayerNorm of sum.
void cpu_add_ln_forward(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias, double eps,
                        Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  check_add_layer_norm("add_layer_norm", x, branch, sum);
  axpy_out(x.device())(x, branch, 1.0, sum);
  cpu_ln_forward(sum, weight, bias, eps, y, mean, rstd);
}

void cpu_ln_backward(const Tensor& dy_in, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                     const Tensor& weight, Tensor& dx, Tensor& dweight, Tensor& dbias, LayerNormGradAdds adds) {
  check_layer_norm_output_dtype("layer_norm backward", x.dtype(), dy_in.dtype());
  const Tensor dy = in_dtype_of(dy_in, x.dtype());
  check_layer_norm_dx_extras("layer_norm backward", x, dx, adds);
  dispatch_norm_types(x.dtype(), "layer_norm backward", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    // With no rows (M = 0) the normalised size comes from the parameter gradients, which are zeros.
    const int64_t M = mean.numel();
    const int64_t D = M ? x.numel() / M
                        : (dweight.defined() ? dweight.numel() : dbias.defined() ? dbias.numel() : 0);
    std::vector<S> w = vec<S>(weight, D, 1), mv = vec<S>(mean, M, 0), rv = vec<S>(rstd, M, 1);
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dy.data_ptr());
    if (dx.defined()) {
      T* pdx = static_cast<T*>(dx.data_ptr());
      // What the computed dx is added to: the sum so far in dx itself, or add_layer_norm's residual.
      const T* base = adds.dx                     ? pdx
                      : adds.residual.defined() ? static_cast<const T*>(adds.residual.data_ptr())
                                                : nullptr;
      char* narrow = static_cast<char*>(adds.dx_narrow.defined() ? adds.dx_narrow.data_ptr() : nullptr);
      const size_t narrow_size = adds.dx_narrow.defined() ? dtype_size(adds.dx_narrow.dtype()) : 0;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinWork)
      for (int64_t m = 0; m < M; ++m) {
        thread_local std::vector<T> row;
        if (base && row.size() < static_cast<size_t>(D)) row.resize(static_cast<size_t>(D));
        const T* xi = px + m * D;
        const T* di = pd + m * D;
        const S mu = mv[size_t(m)], r = rv[size_t(m)];
        // dx = r * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w
        S sg, sgx;
        sum_g_gxhat<S>(di, w.data(), xi, D, mu, r, sg, sgx);
        const S inv_d = S(1) / static_cast<S>(D), a = sg * inv_d, bb = sgx * inv_d;
        // Added (to base) as a separate pass would add the written row: the row is made in scratch
        // first, so that its products are not fused with the add (the same bits either way).
        T* o = base ? row.data() : pdx + m * D;
        for (int64_t d = 0; d < D; ++d) {
          const S xhat = (static_cast<S>(xi[d]) - mu) * r;
          o[d] = T(r * (static_cast<S>(di[d]) * w[size_t(d)] - a - xhat * bb));
        }
        if (base) {
          const T* in = base + m * D;
          T* sum = pdx + m * D;
          for (int64_t d = 0; d < D; ++d) sum[d] = T(static_cast<acc_t<T>>(in[d]) + static_cast<acc_t<T>>(o[d]));
        }
        if (narrow) convert_host(pdx + m * D, x.dtype(), narrow + m * D * narrow_size, adds.dx_narrow.dtype(), D);
      }
    }
    if (dweight.defined() || dbias.defined()) {
      // Rows added in order m = 0, 1, ... (deterministic); the inner loop over D vectorises.
      std::vector<S> gw(static_cast<size_t>(D), S(0)), gb(static_cast<size_t>(D), S(0));
      for (int64_t m = 0; m < M; ++m) {
        const T* xi = px + m * D;
        const T* di = pd + m * D;
        const S mu = mv[size_t(m)], r = rv[size_t(m)];
        for (int64_t d = 0; d < D; ++d) {
          const S g = static_cast<S>(di[d]);
          gw[size_t(d)] += g * (static_cast<S>(xi[d]) - mu) * r;
          gb[size_t(d)] += g;
        }
      }
      if (adds.params) {
        add_to(gw, dweight, "dweight");
        add_to(gb, dbias, "dbias");
      } else {
        store(gw, dweight);
        store(gb, dbias);
      }
    }
  });
}

TANDEM_REGISTER_KERNEL(layer_norm_forward, DeviceKind::CPU, cpu_ln_forward);
TANDEM_REGISTER_KERNEL(layer_norm_backward, DeviceKind::CPU, cpu_ln_backward);
TANDEM_REGISTER_KERNEL(add_layer_norm_forward, DeviceKind::CPU, cpu_add_ln_forward);

}  // namespace

void check_layer_norm_output_dtype(const char* what, DType x, DType y) {
  TANDEM_CHECK(layer_norm_dtype_fits(x, y),
               "{}: {} output for {} input; expected the input's dtype (or f16/bf16 for f32)", what, dtype_name(y),
               dtype_name(x));
}

void check_add_layer_norm(const char* what, const Tensor& x, const Tensor& branch, const Tensor& sum) {
  TANDEM_CHECK(branch.numel() == x.numel() && sum.numel() == x.numel() && sum.dtype() == x.dtype() &&
                   layer_norm_dtype_fits(x.dtype(), branch.dtype()),
               "{}: x {} {}, branch {} {}, sum {} {}: expected one size, the sum in x's dtype and the branch in "
               "it (or f16/bf16 for f32 x)",
               what, dtype_name(x.dtype()), shape_str(x.shape()), dtype_name(branch.dtype()), shape_str(branch.shape()),
               dtype_name(sum.dtype()), shape_str(sum.shape()));
}

void check_layer_norm_dx_extras(const char* what, const Tensor& x, const Tensor& dx, const LayerNormGradAdds& adds) {
  TANDEM_CHECK(!adds.dx || !adds.residual.defined(), "{}: dx is added to itself or to a residual, not both", what);
  TANDEM_CHECK(!adds.residual.defined() || (dx.defined() && adds.residual.dtype() == x.dtype() &&
                                            adds.residual.numel() == x.numel() && adds.residual.device() == x.device()),
               "{}: the residual added to dx must be {} of {} elements on {}", what, dtype_name(x.dtype()), x.numel(),
               x.device().str());
  TANDEM_CHECK(!adds.dx_narrow.defined() ||
                   (dx.defined() && x.dtype() == DType::f32 &&
                    (adds.dx_narrow.dtype() == DType::bf16 || adds.dx_narrow.dtype() == DType::f16) &&
                    adds.dx_narrow.numel() == x.numel() && adds.dx_narrow.device() == x.device()),
               "{}: dx's narrow copy must be f16 or bf16 of {} elements on {} for f32 x, got {} for {} x", what,
               x.numel(), x.device().str(),
               adds.dx_narrow.defined() ? dtype_name(adds.dx_narrow.dtype()) : "none",
               dtype_name(x.dtype()));
}

}  // namespace tandem::kernels
