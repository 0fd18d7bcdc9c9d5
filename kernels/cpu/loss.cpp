// CPU softmax / log_softmax and the fused cross-entropy (log-softmax + NLL) kernels.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/eigen.h"

#include "runtime/backend/loss.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

// Runs f(row) for row < rows; on OpenMP threads when the work (rows * per_row) is large. Rows
// write disjoint outputs, so results do not depend on the thread count.
template <class F>
void for_rows(int64_t rows, int64_t per_row, F&& f) {
  if (rows * per_row < kParallelMin || rows < 2) {
    for (int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// Max and sum_k exp(x_k - max) over n values at stride s. Kept apart (not folded into one
// log-sum-exp) so that x - max stays exact for large logits.
template <class X>
struct MaxSum {
  X max, sum;
  X lse() const { return max + std::log(sum); }
};
template <class T, class X>
inline MaxSum<X> max_sum_exp(const T* x, int64_t n, int64_t s) {
  X m = -std::numeric_limits<X>::infinity();
  for (int64_t k = 0; k < n; ++k) m = std::max(m, X(x[k * s]));
  if (std::isinf(m)) m = 0;  // all -inf (or a +inf): avoid inf - inf
  X sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += std::exp(X(x[k * s]) - m);
  return {m, sum};
}

// Rows of 64 classes or more in f32/f64: Eigen's vectorised exp and sums instead of scalar expf (an
// ulp or so from libm's), ~5x faster at a vocabulary of 50k classes and at the byte-level GPT's 256
// (forward + backward of [1024, 256], one thread: 1.94 -> 0.36 ms). Narrower rows keep the scalar loops
// above. The vectorised exp may give ~1e-38 rather than 0 for -inf (Eigen's AVX2 exp does; its
// AVX-512 one gives 0), so -inf logits get an exact 0 where it matters: the gradient, and a row of
// nothing but -inf, whose sum must be 0 (log-sum-exp -inf, as the scalar loop and the GPU give), not
// 4099 x 1e-38 (-80.4).
constexpr int64_t kWideRow = 64;
template <class T>
constexpr bool kVectorExp = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class X>
using RowArray = Eigen::Map<const Eigen::Array<X, Eigen::Dynamic, 1>>;

template <class X>
inline MaxSum<X> max_sum_exp_wide(const X* x, int64_t n) {
  RowArray<X> a(x, n);
  X m = a.maxCoeff();
  if (m == -std::numeric_limits<X>::infinity()) return {X(0), X(0)};
  if (std::isinf(m)) m = 0;
  return {m, (a - m).exp().sum()};
}

// o[c] = exp(x[c] - l) * g over a contiguous row.
template <class X>
inline void exp_scaled_wide(const X* x, int64_t n, X l, X g, X* o) {
  Eigen::Map<Eigen::Array<X, Eigen::Dynamic, 1>>(o, n) = (RowArray<X>(x, n) - l).exp() * g;
  for (int64_t c = 0; c < n; ++c) o[c] = x[c] == -std::numeric_limits<X>::infinity() ? X(0) : o[c];
}

template <class T>
void softmax_typed(const Tensor& x, Tensor& y, int64_t outer, int64_t n, int64_t inner, bool log) {
  using X = acc_t<T>;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(y.data_ptr());
  if (n == 0) return;
  for_rows(outer * inner, n, [&](int64_t row) {
    const int64_t o = row / inner, i = row % inner;
    const T* xs = px + o * n * inner + i;
    T* ys = py + o * n * inner + i;
    const MaxSum<X> ms = max_sum_exp<T, X>(xs, n, inner);
    if (log) {
      const X log_sum = std::log(ms.sum);
      for (int64_t k = 0; k < n; ++k) ys[k * inner] = T((X(xs[k * inner]) - ms.max) - log_sum);
    } else {
      const X inv = X(1) / ms.sum;
      for (int64_t k = 0; k < n; ++k) ys[k * inner] = T(std::exp(X(xs[k * inner]) - ms.max) * inv);
    }
  });
}

void cpu_softmax(const Tensor& x, Tensor& y, int64_t outer, int64_t n, int64_t inner, bool log) {
  dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    softmax_typed<decltype(tag)>(x, y, outer, n, inner, log);
  });
}

template <class T>
void softmax_backward_typed(const Tensor& gy, const Tensor& y, Tensor& gx, int64_t outer, int64_t n,
                            int64_t inner, bool log) {
  using X = acc_t<T>;
  const T* pg = static_cast<const T*>(gy.data_ptr());
  const T* py = static_cast<const T*>(y.data_ptr());
  T* po = static_cast<T*>(gx.data_ptr());
  for_rows(outer * inner, n, [&](int64_t row) {
    const int64_t base = (row / inner) * n * inner + row % inner;
    const T* g = pg + base;
    const T* yy = py + base;
    T* o = po + base;
    X dot = 0;
    if (log) {
      for (int64_t k = 0; k < n; ++k) dot += X(g[k * inner]);
      for (int64_t k = 0; k < n; ++k) o[k * inner] = T(X(g[k * inner]) - std::exp(X(yy[k * inner])) * dot);
    } else {
      for (int64_t k = 0; k < n; ++k) dot += X(g[k * inner]) * X(yy[k * inner]);
      for (int64_t k = 0; k < n; ++k) o[k * inner] = T(X(yy[k * inner]) * (X(g[k * inner]) - dot));
    }
  });
}

void cpu_softmax_backward(const Tensor& gy, const Tensor& y, Tensor& gx, int64_t outer, int64_t n,
                          int64_t inner, bool log) {
  dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    softmax_backward_typed<decltype(tag)>(gy, y, gx, outer, n, inner, log);
  });
}

// Targets as i64 (converted from i32), with range checks naming the bad row.
std::vector<int64_t> read_targets(const Tensor& target, int64_t classes, int64_t ignore_index) {
  std::vector<int64_t> t = target.to_vector<int64_t>();
  for (size_t i = 0; i < t.size(); ++i)
    TANDEM_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < classes),
                 "cross_entropy: target {} at row {} is outside [0, {}) and is not ignore_index ({})", t[i], i,
                 classes, ignore_index);
  return t;
}

template <class T, class L>
void cross_entropy_typed(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                         int64_t ignore_index, ops::Reduction reduction) {
  using X = acc_t<T>;
  const int64_t N = logits.size(0), C = logits.size(1);
  const std::vector<int64_t> t = read_targets(target, C, ignore_index);
  const T* px = static_cast<const T*>(logits.data_ptr());
  X* plse = static_cast<X*>(lse.data_ptr());
  std::vector<X> row_loss(static_cast<size_t>(N));
  for_rows(N, C, [&](int64_t n) {
    const T* x = px + n * C;
    MaxSum<X> ms;
    if constexpr (kVectorExp<T>) ms = C >= kWideRow ? max_sum_exp_wide<X>(x, C) : max_sum_exp<T, X>(x, C, 1);
    else ms = max_sum_exp<T, X>(x, C, 1);
    plse[n] = ms.lse();
    const int64_t tn = t[static_cast<size_t>(n)];
    row_loss[static_cast<size_t>(n)] = tn == ignore_index ? X(0) : (ms.max - X(x[tn])) + std::log(ms.sum);
  });
  L* pl = static_cast<L*>(loss.data_ptr());
  if (reduction == ops::Reduction::None) {
    for (int64_t n = 0; n < N; ++n) pl[n] = L(row_loss[static_cast<size_t>(n)]);
    return;
  }
  X total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    total += row_loss[static_cast<size_t>(n)];
    count += t[static_cast<size_t>(n)] != ignore_index;
  }
  if (reduction == ops::Reduction::Mean) total /= X(count);  // 0/0 = NaN, as PyTorch
  pl[0] = L(total);
}

void cpu_cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                       int64_t ignore_index, ops::Reduction reduction) {
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    kernels::with_loss_type<T>(loss.dtype(), [&](auto ltag) {
      cross_entropy_typed<T, decltype(ltag)>(logits, target, loss, lse, ignore_index, reduction);
    });
  });
}

template <class T, class L>
void cross_entropy_backward_typed(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                                  const Tensor& lse, Tensor& grad_logits, int64_t ignore_index,
                                  ops::Reduction reduction) {
  using X = acc_t<T>;
  const int64_t N = logits.size(0), C = logits.size(1);
  const std::vector<int64_t> t = read_targets(target, C, ignore_index);
  const T* px = static_cast<const T*>(logits.data_ptr());
  const X* plse = static_cast<const X*>(lse.data_ptr());
  const L* pg = static_cast<const L*>(grad_loss.data_ptr());
  T* po = static_cast<T*>(grad_logits.data_ptr());
  X scale = reduction == ops::Reduction::None ? X(1) : X(pg[0]);
  if (reduction == ops::Reduction::Mean) {
    int64_t count = 0;
    for (int64_t n = 0; n < N; ++n) count += t[static_cast<size_t>(n)] != ignore_index;
    scale /= X(count);
  }
  for_rows(N, C, [&](int64_t n) {
    const int64_t tn = t[static_cast<size_t>(n)];
    T* o = po + n * C;
    if (tn == ignore_index) {
      for (int64_t c = 0; c < C; ++c) o[c] = T(X(0));
      return;
    }
    const X g = reduction == ops::Reduction::None ? X(pg[n]) : scale;
    const T* x = px + n * C;
    const X l = plse[n];
    if constexpr (kVectorExp<T>) {
      if (C >= kWideRow) {
        exp_scaled_wide<X>(x, C, l, g, o);
        o[tn] = T(X(o[tn]) - g);
        return;
      }
    }
    for (int64_t c = 0; c < C; ++c) o[c] = T(std::exp(X(x[c]) - l) * g);
    o[tn] = T(X(o[tn]) - g);
  });
}

void cpu_cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                                const Tensor& lse, Tensor& grad_logits, int64_t ignore_index,
                                ops::Reduction reduction) {
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    kernels::with_loss_type<T>(grad_loss.dtype(), [&](auto ltag) {
      cross_entropy_backward_typed<T, decltype(ltag)>(grad_loss, logits, target, lse, grad_logits, ignore_index,
                                                      reduction);
    });
  });
}

// The two kernels in turn (the CPU reads a row of the logits from cache either way).
void cpu_cross_entropy_with_grad(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& lse,
                                 Tensor& grad_logits, int64_t ignore_index, ops::Reduction reduction) {
  TANDEM_CHECK(reduction != ops::Reduction::None, "cross_entropy_with_grad: needs a Sum or Mean reduction");
  cpu_cross_entropy(logits, target, loss, lse, ignore_index, reduction);
  cpu_cross_entropy_backward(Tensor::ones({}, loss.dtype()), logits, target, lse, grad_logits, ignore_index,
                             reduction);
}

TANDEM_REGISTER_KERNEL(softmax, DeviceKind::CPU, cpu_softmax);
TANDEM_REGISTER_KERNEL(softmax_backward, DeviceKind::CPU, cpu_softmax_backward);
TANDEM_REGISTER_KERNEL(cross_entropy, DeviceKind::CPU, cpu_cross_entropy);
TANDEM_REGISTER_KERNEL(cross_entropy_backward, DeviceKind::CPU, cpu_cross_entropy_backward);
TANDEM_REGISTER_KERNEL(cross_entropy_with_grad, DeviceKind::CPU, cpu_cross_entropy_with_grad);

}  // namespace
}  // namespace tandem::kernels
