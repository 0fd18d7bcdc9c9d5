// CPU reduction kernels: sum_to (sums over broadcast dims, in a fixed order), its adjoint expand,
// and argmax.
#include <cmath>
#include <vector>

#include "runtime/backend/elementwise.h"
#include "runtime/backend/reduce.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

// Offsets of row q of a plan (all dims but the last) for operands 0 and 1.
inline void row_offsets(const BroadcastPlan& p, int64_t q, int64_t& o0, int64_t& o1) {
  o0 = o1 = 0;
  for (size_t d = p.sizes.size() - 1; d-- > 0;) {
    int64_t i = q % p.sizes[d];
    q /= p.sizes[d];
    o0 += i * p.strides[0][d];
    o1 += i * p.strides[1][d];
  }
}

// Sum of n strided values with 8 partial sums (vectorisable, fixed order).
template <class T, class X>
inline X strided_sum(const T* s, int64_t stride, int64_t n) {
  X part[8] = {};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) part[j] += X(s[i + j]);
  }
  for (; i < n; ++i) part[i & 7] += X(s[i * stride]);
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

template <class T>
void sum_to_typed(const Tensor& src, Tensor& dst, double scale) {
  // Float sums accumulate in double: a bias gradient or a loss over many rows stays accurate, and
  // the cost is hidden behind the memory traffic.
  using X = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, acc_t<T>>;
  const T* ps = static_cast<const T*>(src.data_ptr());
  T* pd = static_cast<T*>(dst.data_ptr());
  const int64_t nd = dst.numel();
  std::vector<X> acc(static_cast<size_t>(nd), X(0));
  if (src.numel() > 0) {
    BroadcastPlan plan = broadcast_plan(src.shape(), {src.shape(), dst.shape()});
    const size_t r = plan.sizes.size();
    const int64_t inner = plan.sizes[r - 1];
    const int64_t ss = plan.strides[0][r - 1], sd = plan.strides[1][r - 1];
    const int64_t rows = src.numel() / inner;
    // Outputs reduced only along the inner run are independent rows: parallel when large.
    const bool rows_independent = sd == 0 && rows == nd;
    auto do_rows = [&](int64_t lo, int64_t hi) {
      for (int64_t q = lo; q < hi; ++q) {
        int64_t os, od;
        row_offsets(plan, q, os, od);
        const T* s = ps + os;
        X* a = acc.data() + od;
        if (sd == 0) {
          a[0] += strided_sum<T, X>(s, ss, inner);
        } else if (ss == 1 && sd == 1) {
          for (int64_t i = 0; i < inner; ++i) a[i] += X(s[i]);
        } else {
          for (int64_t i = 0; i < inner; ++i) a[i * sd] += X(s[i * ss]);
        }
      }
    };
    if (rows_independent && src.numel() >= kParallelMin) {
#pragma omp parallel for schedule(static)
      for (int64_t q = 0; q < rows; ++q) do_rows(q, q + 1);
    } else {
      do_rows(0, rows);
    }
  }
  const X sc = X(scale);
  for (int64_t i = 0; i < nd; ++i) pd[i] = T(acc[static_cast<size_t>(i)] * sc);
}

void cpu_sum_to(const Tensor& src, Tensor& dst, double scale) {
  dispatch(src.dtype(), [&](auto tag) { sum_to_typed<decltype(tag)>(src, dst, scale); }, "sum_to");
}

template <class T>
void expand_typed(const Tensor& src, Tensor& dst, double scale) {
  using X = acc_t<T>;
  const int64_t total = dst.numel();
  if (total == 0) return;
  const T* ps = static_cast<const T*>(src.data_ptr());
  T* pd = static_cast<T*>(dst.data_ptr());
  BroadcastPlan plan = broadcast_plan(dst.shape(), {dst.shape(), src.shape()});
  const size_t r = plan.sizes.size();
  const int64_t inner = plan.sizes[r - 1];
  const int64_t ss = plan.strides[1][r - 1];
  const int64_t rows = total / inner;
  const X sc = X(scale);
  const bool unit = scale == 1.0;
  auto do_rows = [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      int64_t od, os;
      row_offsets(plan, q, od, os);
      const T* s = ps + os;
      T* d = pd + od;
      if (ss == 0) {
        const T v = unit ? s[0] : T(X(s[0]) * sc);
        for (int64_t i = 0; i < inner; ++i) d[i] = v;
      } else if (unit) {
        for (int64_t i = 0; i < inner; ++i) d[i] = s[i * ss];
      } else {
        for (int64_t i = 0; i < inner; ++i) d[i] = T(X(s[i * ss]) * sc);
      }
    }
  };
  if (total >= kParallelMin && rows > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < rows; ++q) do_rows(q, q + 1);
  } else {
    do_rows(0, rows);
  }
}

void cpu_expand(const Tensor& src, Tensor& dst, double scale) {
  dispatch(src.dtype(), [&](auto tag) { expand_typed<decltype(tag)>(src, dst, scale); }, "expand");
}

template <class T>
void argmax_typed(const Tensor& src, Tensor& dst, int64_t outer, int64_t n, int64_t inner) {
  using X = acc_t<T>;
  const T* ps = static_cast<const T*>(src.data_ptr());
  int64_t* pd = dst.data<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* s = ps + o * n * inner + i;
      X best = X(s[0]);
      int64_t arg = 0;
      for (int64_t k = 1; k < n; ++k) {
        X v = X(s[k * inner]);
        bool nan_best = false, nan_v = false;
        if constexpr (!std::is_integral_v<X>) {
          nan_best = std::isnan(best);
          nan_v = std::isnan(v);
        }
        if (!nan_best && (v > best || nan_v)) {
          best = v;
          arg = k;
        }
      }
      pd[o * inner + i] = arg;
    }
  }
}

void cpu_argmax(const Tensor& src, Tensor& dst, int64_t outer, int64_t n, int64_t inner) {
  dispatch(src.dtype(), [&](auto tag) { argmax_typed<decltype(tag)>(src, dst, outer, n, inner); }, "argmax");
}

TANDEM_REGISTER_KERNEL(sum_to, DeviceKind::CPU, cpu_sum_to);
TANDEM_REGISTER_KERNEL(expand, DeviceKind::CPU, cpu_expand);
TANDEM_REGISTER_KERNEL(argmax, DeviceKind::CPU, cpu_argmax);

}  // namespace
}  // namespace tandem::kernels
