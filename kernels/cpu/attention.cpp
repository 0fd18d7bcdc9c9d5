// CPU causal attention, blocked as flash-attention: per (batch, head), tiles of block_q queries x
// block_k keys (f32 products on small_gemm_f32 where the CPU has AVX-512 or AVX2, else Eigen's) with an
// online softmax (running max and sum per query row), so only one [block_q, block_k] score tile
// exists at a time. The forward keeps the per-row logsumexp;
// the backward recomputes each probability tile from it. OpenMP runs over (batch, head); f16/bf16
// are widened to f32, computed, and rounded once, except bf16 where the bf16 GEMM runs on AMX tiles
// (attention_bf16.cpp). Heads contiguous or token-major (AttentionShape).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/cpu/eigen.h"

#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/lanes.h"
#include "kernels/cpu/small_gemm_avx2.h"
#include "kernels/cpu/small_gemm_avx512.h"
#include "runtime/backend/attention.h"

namespace tandem::kernels {
namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
// A head's [t, d] rows, ld elements apart (d for contiguous heads; token-major: the row's width).
using RowStride = Eigen::OuterStride<>;
template <class T>
using CMap = Eigen::Map<const Mat<T>, 0, RowStride>;
template <class T>
using MMap = Eigen::Map<Mat<T>, 0, RowStride>;

// 32 queries x 128 keys: a score tile (16 KB in f32) and the q/k/v blocks it reads stay in L1/L2, and
// a query tile's last key tile stops at its last query, so at most a 32 x 32 triangle of a diagonal
// tile is masked work. Against 64 x 64 (fwd + bwd, one thread): 4-6% faster at t = 128, d = 64 and
// t = 200, d = 128, 4% at t = 1024; 32 x 64, 16 x 128 and 32 x 32 were slower (docs/transformers.md).
constexpr int64_t kBlockQ = 32, kBlockK = 128;

struct Tiles {
  int64_t bq, bk;
};
Tiles tiles(const AttentionShape& s) {
  return {s.block_q > 0 ? s.block_q : kBlockQ, s.block_k > 0 ? s.block_k : kBlockK};
}

// f32 tile products on small_gemm_f32 (AVX-512, nothing packed) instead of Eigen's, which packs
// both operands of every tile product (TANDEM_CPU_GEMM=eigen keeps Eigen's, for A/B runs). They need
// the head's keys (and, in the backward, values) transposed, [d, t] with rows `ld` apart, once per
// head; every other operand is read where it lies.
template <class T>
struct Transposed {
  std::vector<T> rows;
  int64_t ld = 0;
  // x [t, d] with rows ld_x apart, transposed.
  void of(const T* x, int64_t t, int64_t d, int64_t ld_x) {
    ld = (t + 15) / 16 * 16;
    rows.resize(static_cast<size_t>(d * ld));
    if constexpr (std::is_same_v<T, float>) {
      if (avx512::has_f32()) return avx512::transpose_f32(x, t, d, ld_x, rows.data(), ld);
      if (avx2::has_f32()) return avx2::transpose_f32(x, t, d, ld_x, rows.data(), ld);
    }
    for (int64_t j = 0; j < t; ++j)
      for (int64_t p = 0; p < d; ++p) rows[static_cast<size_t>(p * ld + j)] = x[j * ld_x + p];
  }
  const T* at(int64_t col) const { return rows.data() + col; }
};

// C = alpha * op(A) B or (accumulate) C += ..., as small_gemm_f32 (op(A)(i, p) = a[i * a_row + p * a_col]),
// when T is f32 and `fast`; false when the caller must run Eigen's product instead (which computes
// the whole product: the band only says what may be skipped).
template <class T>
bool fast_product(bool fast, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_row, int64_t a_col,
                  const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate, SmallGemmBand band) {
  if constexpr (std::is_same_v<T, float>) {
    if (fast) {
      if (avx512::has_f32())
        avx512::small_gemm_f32(m, n, k, alpha, a, a_row, a_col, b, ldb, c, ldc, accumulate, band);
      else
        avx2::small_gemm_f32(m, n, k, alpha, a, a_row, a_col, b, ldb, c, ldc, accumulate, band);
    }
    return fast;
  } else {
    return false;
  }
}

// The causal bands of a (query tile q0, key tile k0) pair's products (small_gemm_band.h): C's rows
// are queries and its columns or products keys (scores, P V, dS K), or C's rows are keys and its
// products queries (P^T dO, dS^T Q). Query i sees key j when k0 + j <= q0 + i.
SmallGemmBand keys_of_queries(SmallGemmBand::Kind kind, int64_t q0, int64_t k0) { return {kind, q0 - k0}; }
SmallGemmBand queries_of_keys(int64_t q0, int64_t k0) { return {SmallGemmBand::Kind::k_begin, k0 - q0}; }

// M(i, j) = value for each key j after query i (tile rows from query q0, columns from key k0): only
// rows of a tile that crosses the diagonal have any.
template <class T>
void fill_unseen(Mat<T>& M, int64_t q0, int64_t k0, T value) {
  const int64_t kb = M.cols();
  for (int64_t i = 0; i < M.rows() && k0 + kb - 1 > q0 + i; ++i)
    M.row(i).tail(kb - std::max<int64_t>(q0 + i + 1 - k0, 0)).setConstant(value);
}

// Scores of the key tile [k0, k0 + kb) for the query tile [q0, q0 + qb), with the keys after each
// query set to -inf (only tiles crossing the diagonal have any; the fast product skips what it can of
// them). kt: the head's keys transposed (the fast product), or null.
template <class T>
void scores(const CMap<T>& Q, const CMap<T>& K, const Transposed<T>* kt, int64_t q0, int64_t qb, int64_t k0, int64_t kb,
            T scale, Mat<T>& S) {
  S.resize(qb, kb);
  if (!fast_product<T>(kt != nullptr, qb, kb, Q.cols(), scale, Q.data() + q0 * Q.outerStride(), Q.outerStride(), 1,
                       kt ? kt->at(k0) : nullptr, kt ? kt->ld : 0, S.data(), kb, false,
                       keys_of_queries(SmallGemmBand::Kind::cols, q0, k0)))
    S.noalias() = scale * (Q.middleRows(q0, qb) * K.middleRows(k0, kb).transpose());
  fill_unseen(S, q0, k0, -std::numeric_limits<T>::infinity());
}

// S = exp(S - shift[i]) row by row: contiguous rows, so Eigen's vectorised exp runs (the expression
// over the whole tile with a broadcast shift fell back to scalar expf, 15% of the time). The keys after
// each query are set to exactly 0: the vectorised exp returns ~1e-38, not 0, for -inf.
template <class T, class Shift>
void exp_rows(Mat<T>& S, const Shift& shift, int64_t q0, int64_t k0) {
  for (int64_t i = 0; i < S.rows(); ++i) S.row(i) = (S.row(i).array() - shift[i]).exp().matrix();
  fill_unseen(S, q0, k0, T(0));
}

// One head: q, k, v [t, d] with rows ld apart, o [t, d] with rows ld_o apart, lse [t]. fast: the
// tile products on small_gemm_f32 (fast_products).
template <class T>
void forward_head(const T* q, const T* k, const T* v, T* o, T* lse, int64_t ld, int64_t ld_o,
                  const AttentionShape& s, bool fast) {
  const int64_t t = s.t, d = s.d;
  const Tiles tl = tiles(s);
  const T scale = static_cast<T>(s.scale);
  CMap<T> Q(q, t, d, RowStride(ld)), K(k, t, d, RowStride(ld)), V(v, t, d, RowStride(ld));
  MMap<T> O(o, t, d, RowStride(ld_o));
  Mat<T> S, acc;
  Vec<T> m, l, m_new;
  thread_local Transposed<T> kt;
  if (fast) kt.of(k, t, d, ld);
  for (int64_t q0 = 0; q0 < t; q0 += tl.bq) {
    const int64_t qb = std::min(tl.bq, t - q0);
    m.setConstant(qb, -std::numeric_limits<T>::infinity());
    l.setZero(qb);
    acc.setZero(qb, d);
    // Key 0 is in the first tile and seen by every query, so m is finite from the first tile on.
    for (int64_t k0 = 0; k0 < q0 + qb; k0 += tl.bk) {
      const int64_t kb = std::min(tl.bk, q0 + qb - k0);
      scores(Q, K, fast ? &kt : nullptr, q0, qb, k0, kb, scale, S);
      m_new = m.cwiseMax(S.rowwise().maxCoeff());
      const Vec<T> alpha = (m - m_new).array().exp();
      exp_rows(S, m_new, q0, k0);  // P tile, unnormalised
      l = alpha.cwiseProduct(l) + S.rowwise().sum();
      acc = alpha.asDiagonal() * acc;
      if (!fast_product<T>(fast, qb, d, kb, T(1), S.data(), kb, 1, v + k0 * ld, ld, acc.data(), d, true,
                           keys_of_queries(SmallGemmBand::Kind::k_end, q0, k0)))
        acc.noalias() += S * V.middleRows(k0, kb);
      m = m_new;
    }
    O.middleRows(q0, qb) = l.cwiseInverse().asDiagonal() * acc;
    for (int64_t i = 0; i < qb; ++i) lse[q0 + i] = m[i] + std::log(l[i]);
  }
}

// One head, flash-attention 2's order: per key tile, dK and dV accumulate over the query tiles that
// see it, and dQ (zeroed first) accumulates in place. delta[i] = dO[i] . O[i] is the softmax
// backward's row term (sum_j P_ij dP_ij). Each product stops at the last key its query tile sees.
// fast as forward_head's.
template <class T>
void backward_head(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk,
                   T* dv, int64_t ld, int64_t ld_o, const AttentionShape& s, bool fast) {
  const int64_t t = s.t, d = s.d;
  const Tiles tl = tiles(s);
  const T scale = static_cast<T>(s.scale);
  CMap<T> Q(q, t, d, RowStride(ld)), K(k, t, d, RowStride(ld)), V(v, t, d, RowStride(ld));
  CMap<T> O(o, t, d, RowStride(ld_o)), dO(dout, t, d, RowStride(ld_o));
  Eigen::Map<const Vec<T>> L(lse, t);
  MMap<T> dQ(dq, t, d, RowStride(ld)), dK(dk, t, d, RowStride(ld)), dV(dv, t, d, RowStride(ld));
  const Vec<T> delta = (dO.array() * O.array()).rowwise().sum();
  dQ.setZero();
  Mat<T> S, dP;
  thread_local Transposed<T> kt, vt;
  if (fast) {
    kt.of(k, t, d, ld);
    vt.of(v, t, d, ld);
  }
  for (int64_t k0 = 0; k0 < t; k0 += tl.bk) {
    const int64_t kb = std::min(tl.bk, t - k0);
    dK.middleRows(k0, kb).setZero();
    dV.middleRows(k0, kb).setZero();
    // The first query tile that sees key k0 (query index >= k0).
    for (int64_t q0 = (k0 / tl.bq) * tl.bq; q0 < t; q0 += tl.bq) {
      const int64_t qb = std::min(tl.bq, t - q0), kn = std::min(kb, q0 + qb - k0);
      auto dKb = dK.middleRows(k0, kn);
      auto dVb = dV.middleRows(k0, kn);
      scores(Q, K, fast ? &kt : nullptr, q0, qb, k0, kn, scale, S);
      exp_rows(S, L.segment(q0, qb), q0, k0);  // P tile
      const T* dO_q = dout + q0 * ld_o;
      if (!fast_product<T>(fast, kn, d, qb, T(1), S.data(), 1, kn, dO_q, ld_o, dv + k0 * ld, ld, true,
                           queries_of_keys(q0, k0)))
        dVb.noalias() += S.transpose() * dO.middleRows(q0, qb);
      dP.resize(qb, kn);
      if (!fast_product<T>(fast, qb, kn, d, T(1), dO_q, ld_o, 1, fast ? vt.at(k0) : nullptr, vt.ld, dP.data(), kn,
                           false, keys_of_queries(SmallGemmBand::Kind::cols, q0, k0)))
        dP.noalias() = dO.middleRows(q0, qb) * V.middleRows(k0, kn).transpose();
      // dS, with the score scale; then exactly 0 past each query's last key (the banded dP holds
      // anything there, and dS K and dS^T Q skip only whole tiles' zeros, not every row's).
      dP = S.cwiseProduct(dP.colwise() - delta.segment(q0, qb)) * scale;
      fill_unseen(dP, q0, k0, T(0));
      if (!fast_product<T>(fast, qb, d, kn, T(1), dP.data(), kn, 1, k + k0 * ld, ld, dq + q0 * ld, ld, true,
                           keys_of_queries(SmallGemmBand::Kind::k_end, q0, k0)))
        dQ.middleRows(q0, qb).noalias() += dP * K.middleRows(k0, kn);
      if (!fast_product<T>(fast, kn, d, qb, T(1), dP.data(), 1, kn, q + q0 * ld, ld, dk + k0 * ld, ld, true,
                           queries_of_keys(q0, k0)))
        dKb.noalias() += dP.transpose() * Q.middleRows(q0, qb);
    }
  }
}

// q, k, v (and dq, dk, dv) at their offsets, head bh's rows from HeadRows (contiguous or token-major).
// Whether T's tile products run on small_gemm_f32 (AVX-512, else AVX2): read once a call
// (TANDEM_CPU_GEMM, TANDEM_CPU_ISA), not per head.
template <class T>
bool fast_products() {
  return std::is_same_v<T, float> && std::string_view(cpu_f32_gemm_isa()) != "eigen";
}

template <class T>
void forward_t(const T* q, const T* k, const T* v, T* o, T* lse, const AttentionShape& s) {
  const bool fast = fast_products<T>();
  for_each_head(s, [&](int64_t bh, int64_t b, int64_t bo, int64_t ld, int64_t ld_o) {
    forward_head(q + s.q_off + b, k + s.k_off + b, v + s.v_off + b, o + bo, lse + bh * s.t, ld, ld_o, s, fast);
  });
}

template <class T>
void backward_t(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                const AttentionShape& s) {
  const bool fast = fast_products<T>();
  for_each_head(s, [&](int64_t bh, int64_t b, int64_t bo, int64_t ld, int64_t ld_o) {
    backward_head(q + s.q_off + b, k + s.k_off + b, v + s.v_off + b, o + bo, lse + bh * s.t, dout + bo,
                  dq + s.q_off + b, dk + s.k_off + b, dv + s.v_off + b, ld, ld_o, s, fast);
  });
}

// f16/bf16 run the f32 path on widened copies. A tensor passed for several operands (token-major q,
// k and v are one tensor, so are dq, dk and dv) gets one copy: separate copies of dq, dk and dv would
// each narrow their whole buffer back over the others' columns.
Tensor widened(const Tensor& t) {
  Tensor r = Tensor::empty(t.shape(), DType::f32, t.device());
  convert_host(t.data_ptr(), t.dtype(), r.data_ptr(), DType::f32, t.numel());
  return r;
}
Tensor f32_like(const Tensor& t) { return Tensor::empty(t.shape(), DType::f32, t.device()); }
// make(x) for each of a, b, c, made once for a tensor passed twice.
template <class F>
std::array<Tensor, 3> once_each(const Tensor& a, const Tensor& b, const Tensor& c, F&& make) {
  Tensor ma = make(a), mb = b.is_same(a) ? ma : make(b);
  Tensor mc = c.is_same(a) ? ma : c.is_same(b) ? mb : make(c);
  return {ma, mb, mc};
}
void narrow_into(const Tensor& f, Tensor& dst) {
  convert_host(f.data_ptr(), DType::f32, dst.data_ptr(), dst.dtype(), dst.numel());
}
template <class T>
const T* ptr(const Tensor& t) { return static_cast<const T*>(t.data_ptr()); }
template <class T>
T* mptr(Tensor& t) { return static_cast<T*>(t.data_ptr()); }

void cpu_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                           const AttentionShape& s) {
  dispatch_floating(q.dtype(), "causal_attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      forward_t<T>(ptr<T>(q), ptr<T>(k), ptr<T>(v), mptr<T>(out), mptr<T>(lse), s);
    } else if (std::is_same_v<T, bfloat16> && attention_bf16_on_tiles()) {
      attention_forward_bf16(ptr<bfloat16>(q), ptr<bfloat16>(k), ptr<bfloat16>(v), mptr<bfloat16>(out),
                             mptr<float>(lse), s);
    } else {
      Tensor of = Tensor::empty(out.shape(), DType::f32, out.device());
      auto w = once_each(q, k, v, widened);
      forward_t<float>(ptr<float>(w[0]), ptr<float>(w[1]), ptr<float>(w[2]), mptr<float>(of), mptr<float>(lse), s);
      narrow_into(of, out);
    }
  });
}

void cpu_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv, const AttentionShape& s) {
  dispatch_floating(q.dtype(), "causal_attention backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      backward_t<T>(ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(out), ptr<T>(lse), ptr<T>(dout), mptr<T>(dq),
                    mptr<T>(dk), mptr<T>(dv), s);
    } else if (std::is_same_v<T, bfloat16> && attention_bf16_on_tiles()) {
      attention_backward_bf16(ptr<bfloat16>(q), ptr<bfloat16>(k), ptr<bfloat16>(v), ptr<bfloat16>(out),
                              ptr<float>(lse), ptr<bfloat16>(dout), mptr<bfloat16>(dq), mptr<bfloat16>(dk),
                              mptr<bfloat16>(dv), s);
    } else {
      auto w = once_each(q, k, v, widened);
      auto f = once_each(dq, dk, dv, f32_like);
      backward_t<float>(ptr<float>(w[0]), ptr<float>(w[1]), ptr<float>(w[2]), ptr<float>(widened(out)), ptr<float>(lse),
                        ptr<float>(widened(dout)), mptr<float>(f[0]), mptr<float>(f[1]), mptr<float>(f[2]), s);
      narrow_into(f[0], dq);
      if (!dk.is_same(dq)) narrow_into(f[1], dk);
      if (!dv.is_same(dq) && !dv.is_same(dk)) narrow_into(f[2], dv);
    }
  });
}

bool cpu_attention_low_precision_native(Device, DType dtype) {
  return dtype == DType::bf16 && attention_bf16_on_tiles();
}

TANDEM_REGISTER_KERNEL(attention_low_precision_native, DeviceKind::CPU, cpu_attention_low_precision_native);
TANDEM_REGISTER_KERNEL(attention_forward, DeviceKind::CPU, cpu_attention_forward);
TANDEM_REGISTER_KERNEL(attention_backward, DeviceKind::CPU, cpu_attention_backward);

}  // namespace
}  // namespace tandem::kernels
