// GemmArgs' epilogue on the CPU: rows of C widened to the accumulation type, the bias added, the
// pre-activation stored, GELU applied, rounded once on store; or GELU's backward on C and C's
// column sums (dgelu_pre, c_col_sums). The CUDA backend runs cuBLASLt's epilogues instead (or its
// own kernels where cuBLASLt has none); both are tested against this.
#include "kernels/cpu/gemm_epilogue.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/gelu.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

void check_gemm_epilogue(const GemmArgs& g) {
  TANDEM_CHECK(!g.wide_c || is_low_precision(g.dtype), "gemm: wide_c needs f16 or bf16 operands, got {}",
               dtype_name(g.dtype));
  TANDEM_CHECK(!g.wide_c || (!g.bias && !g.pre && !g.gelu && !g.dgelu_pre && !g.c_col_sums),
               "gemm: wide_c allows no epilogue but a_row_sums");
  if (!g.has_epilogue()) return;
  TANDEM_CHECK(g.batch == 1, "gemm: an epilogue needs batch 1, got {}", g.batch);
  TANDEM_CHECK(!g.a_row_sums || (!g.bias && !g.pre && !g.gelu), "gemm: a_row_sums excludes bias, pre and gelu");
  TANDEM_CHECK(!g.c_col_sums || g.dgelu_pre, "gemm: c_col_sums comes with dgelu_pre");
  TANDEM_CHECK(!g.c_col_sums || g.ldc == g.n, "gemm: c_col_sums needs a dense C (ldc {} for n {})", g.ldc, g.n);
  TANDEM_CHECK(!g.dgelu_pre || (!g.bias && !g.pre && !g.gelu && !g.a_row_sums),
               "gemm: dgelu_pre excludes bias, pre, gelu and a_row_sums");
  TANDEM_CHECK(!g.pre || g.gelu, "gemm: pre is GELU's input; it needs gelu");
  TANDEM_CHECK(!g.sums_add || g.a_row_sums || g.c_col_sums, "gemm: sums_add needs a_row_sums or c_col_sums");
}

namespace {

constexpr int64_t kParallelMinElements = 1 << 15;

// The epilogue's sums (a_row_sums, c_col_sums) to `out`: rounded to T, or (sums_add) added to what
// it holds in their own dtype.
template <class T>
void store_sums(const GemmArgs& g, const std::vector<acc_t<T>>& sums, void* out) {
  if (g.sums_add) {
    auto* o = static_cast<acc_t<T>*>(out);
    for (size_t j = 0; j < sums.size(); ++j) o[j] += sums[j];
  } else {
    T* o = static_cast<T*>(out);
    for (size_t j = 0; j < sums.size(); ++j) o[j] = T(sums[j]);
  }
}

template <class T>
void epilogue_rows(const GemmArgs& g) {
  using X = acc_t<T>;
  T* c = static_cast<T*>(g.c);
  T* pre = static_cast<T*>(g.pre);
  const T* bias = static_cast<const T*>(g.bias);
  const int64_t m = g.m, n = g.n;
  if constexpr (std::is_same_v<X, T>) {
    // C already holds the accumulation type: the biased value goes straight to pre (or C) and GELU
    // reads it from there, two passes over a row instead of a copy out, a copy to pre and a copy back.
#pragma omp parallel for schedule(static) if (m * n >= kParallelMinElements)
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * g.ldc;
      T* v = pre ? pre + i * g.ldc : ci;
      if (bias)
        for (int64_t j = 0; j < n; ++j) v[j] = ci[j] + bias[j];
      else if (pre)
        std::copy(ci, ci + n, v);
      if (g.gelu) {
        if constexpr (std::is_same_v<X, float>) gelu_tanh_f32(v, nullptr, ci, n);
        else
          for (int64_t j = 0; j < n; ++j) ci[j] = gelu_tanh(v[j]);
      }
    }
    return;
  }
#pragma omp parallel if (m * n >= kParallelMinElements)
  {
    std::vector<X> row(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * g.ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = static_cast<X>(ci[j]) + (bias ? static_cast<X>(bias[j]) : X(0));
      if (pre)
        for (int64_t j = 0; j < n; ++j) pre[i * g.ldc + j] = T(row[j]);
      if (g.gelu) {
        if constexpr (std::is_same_v<X, float>) gelu_tanh_f32(row.data(), nullptr, row.data(), n);
        else
          for (int64_t j = 0; j < n; ++j) row[j] = gelu_tanh(row[j]);
      }
      for (int64_t j = 0; j < n; ++j) ci[j] = T(row[j]);
    }
  }
}

}  // namespace

// C[i, j] = C[i, j] * gelu'(pre[i, j]) row by row (gelu_tanh_span: 16-bit rows through f32 and
// Eigen's vectorised tanh), rounded to T; then the column sums of the rounded values, rows in order.
template <class T>
void dgelu_rows(const GemmArgs& g) {
  using X = acc_t<T>;
  T* c = static_cast<T*>(g.c);
  const T* pre = static_cast<const T*>(g.dgelu_pre);
  const int64_t m = g.m, n = g.n;
#pragma omp parallel for schedule(static) if (m * n >= kParallelMinElements)
  for (int64_t i = 0; i < m; ++i) gelu_tanh_span(pre + i * g.ldc, c + i * g.ldc, c + i * g.ldc, n);
  if (!g.c_col_sums) return;
  std::vector<X> sums(static_cast<size_t>(n), X(0));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) sums[j] += static_cast<X>(c[i * g.ldc + j]);
  store_sums<T>(g, sums, g.c_col_sums);
}

void cpu_gemm_epilogue(const GemmArgs& g) {
  check_gemm_epilogue(g);
  if (g.dgelu_pre) {
    dispatch_floating(g.dtype, "gemm epilogue", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_floating_type_v<T>) dgelu_rows<T>(g);
    });
    return;
  }
  if (!g.bias && !g.pre && !g.gelu) return;
  dispatch_floating(g.dtype, "gemm epilogue", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_type_v<T>) epilogue_rows<T>(g);
  });
}

void cpu_gemm_a_row_sums(const GemmArgs& g) {
  check_gemm_epilogue(g);
  if (!g.a_row_sums) return;
  dispatch_floating(g.dtype, "gemm a_row_sums", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_type_v<T>) {
      using X = acc_t<T>;
      const T* a = static_cast<const T*>(g.a);
      // op(A)[i, p] is a[p * lda + i] when A is stored transposed ([k, m]), else a[i * lda + p].
      std::vector<X> sums(static_cast<size_t>(g.m), X(0));
      if (g.trans_a) {
        for (int64_t p = 0; p < g.k; ++p)
          for (int64_t i = 0; i < g.m; ++i) sums[i] += static_cast<X>(a[p * g.lda + i]);
      } else {
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t p = 0; p < g.k; ++p) sums[i] += static_cast<X>(a[i * g.lda + p]);
      }
      store_sums<T>(g, sums, g.a_row_sums);
    }
  });
}

}  // namespace tandem::kernels
