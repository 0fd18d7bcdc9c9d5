// CPU causal attention, blocked as flash-attention: per (batch, head), tiles of block_q queries x
// block_k keys through Eigen products with an online softmax (running max and sum per query row), so
// only one [block_q, block_k] score tile exists at a time. The forward keeps the per-row logsumexp;
// the backward recomputes each probability tile from it. OpenMP runs over (batch, head); f16/bf16
// are widened to f32, computed, and rounded once.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/eigen.h"

#include "kernels/cpu/lanes.h"
#include "runtime/backend/attention.h"

namespace tandem::kernels {
namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using CMap = Eigen::Map<const Mat<T>>;
template <class T>
using MMap = Eigen::Map<Mat<T>>;

// 64 x 64 tiles: a score tile (16 KB in f32) and the q/k/v blocks it reads stay in L1/L2; measured
// against 32 and 128 on the gpt shapes (docs/transformers.md).
constexpr int64_t kBlockQ = 64, kBlockK = 64;

struct Tiles {
  int64_t bq, bk;
};
Tiles tiles(const AttentionShape& s) {
  return {s.block_q > 0 ? s.block_q : kBlockQ, s.block_k > 0 ? s.block_k : kBlockK};
}

// Scores of the key tile [k0, k0 + kb) for the query tile [q0, q0 + qb), with the keys after each
// query set to -inf (only tiles crossing the diagonal have any).
template <class T>
void scores(const CMap<T>& Q, const CMap<T>& K, int64_t q0, int64_t qb, int64_t k0, int64_t kb, T scale,
            Mat<T>& S) {
  S.resize(qb, kb);
  S.noalias() = scale * (Q.middleRows(q0, qb) * K.middleRows(k0, kb).transpose());
  if (k0 + kb - 1 > q0) {
    for (int64_t i = 0; i < qb; ++i)
      for (int64_t j = std::max<int64_t>(0, q0 + i + 1 - k0); j < kb; ++j) S(i, j) = -std::numeric_limits<T>::infinity();
  }
}

// S = exp(S - shift[i]) row by row: contiguous rows, so Eigen's vectorised exp runs (the expression
// over the whole tile with a broadcast shift fell back to scalar expf, 15% of the time). The keys after
// each query are set to exactly 0: the vectorised exp returns ~1e-38, not 0, for -inf.
template <class T, class Shift>
void exp_rows(Mat<T>& S, const Shift& shift, int64_t q0, int64_t k0) {
  const int64_t qb = S.rows(), kb = S.cols();
  for (int64_t i = 0; i < qb; ++i) {
    S.row(i) = (S.row(i).array() - shift[i]).exp().matrix();
    for (int64_t j = std::max<int64_t>(0, q0 + i + 1 - k0); j < kb; ++j) S(i, j) = T(0);
  }
}

// One head: q, k, v, o [t, d], lse [t].
template <class T>
void forward_head(const T* q, const T* k, const T* v, T* o, T* lse, const AttentionShape& s) {
  const int64_t t = s.t, d = s.d;
  const Tiles tl = tiles(s);
  const T scale = static_cast<T>(s.scale);
  CMap<T> Q(q, t, d), K(k, t, d), V(v, t, d);
  MMap<T> O(o, t, d);
  Mat<T> S, acc;
  Vec<T> m, l, m_new;
  for (int64_t q0 = 0; q0 < t; q0 += tl.bq) {
    const int64_t qb = std::min(tl.bq, t - q0);
    m.setConstant(qb, -std::numeric_limits<T>::infinity());
    l.setZero(qb);
    acc.setZero(qb, d);
    // Key 0 is in the first tile and seen by every query, so m is finite from the first tile on.
    for (int64_t k0 = 0; k0 < q0 + qb; k0 += tl.bk) {
      const int64_t kb = std::min(tl.bk, q0 + qb - k0);
      scores(Q, K, q0, qb, k0, kb, scale, S);
      m_new = m.cwiseMax(S.rowwise().maxCoeff());
      const Vec<T> alpha = (m - m_new).array().exp();
      exp_rows(S, m_new, q0, k0);  // P tile, unnormalised
      l = alpha.cwiseProduct(l) + S.rowwise().sum();
      acc = alpha.asDiagonal() * acc;
      acc.noalias() += S * V.middleRows(k0, kb);
      m = m_new;
    }
    O.middleRows(q0, qb) = l.cwiseInverse().asDiagonal() * acc;
    for (int64_t i = 0; i < qb; ++i) lse[q0 + i] = m[i] + std::log(l[i]);
  }
}

// One head, flash-attention 2's order: per key tile, dK and dV accumulate over the query tiles that
// see it, and dQ (zeroed first) accumulates in place. delta[i] = dO[i] . O[i] is the softmax
// backward's row term (sum_j P_ij dP_ij).
template <class T>
void backward_head(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk,
                   T* dv, const AttentionShape& s) {
  const int64_t t = s.t, d = s.d;
  const Tiles tl = tiles(s);
  const T scale = static_cast<T>(s.scale);
  CMap<T> Q(q, t, d), K(k, t, d), V(v, t, d), O(o, t, d), dO(dout, t, d);
  Eigen::Map<const Vec<T>> L(lse, t);
  MMap<T> dQ(dq, t, d), dK(dk, t, d), dV(dv, t, d);
  const Vec<T> delta = (dO.array() * O.array()).rowwise().sum();
  dQ.setZero();
  Mat<T> S, dP;
  for (int64_t k0 = 0; k0 < t; k0 += tl.bk) {
    const int64_t kb = std::min(tl.bk, t - k0);
    auto dKb = dK.middleRows(k0, kb);
    auto dVb = dV.middleRows(k0, kb);
    dKb.setZero();
    dVb.setZero();
    // The first query tile that sees key k0 (query index >= k0).
    for (int64_t q0 = (k0 / tl.bq) * tl.bq; q0 < t; q0 += tl.bq) {
      const int64_t qb = std::min(tl.bq, t - q0);
      scores(Q, K, q0, qb, k0, kb, scale, S);
      exp_rows(S, L.segment(q0, qb), q0, k0);  // P tile
      dVb.noalias() += S.transpose() * dO.middleRows(q0, qb);
      dP.noalias() = dO.middleRows(q0, qb) * V.middleRows(k0, kb).transpose();
      dP = S.cwiseProduct(dP.colwise() - delta.segment(q0, qb)) * scale;  // dS, with the score scale
      dQ.middleRows(q0, qb).noalias() += dP * K.middleRows(k0, kb);
      dKb.noalias() += dP.transpose() * Q.middleRows(q0, qb);
    }
  }
}

template <class T>
void forward_t(const T* q, const T* k, const T* v, T* o, T* lse, const AttentionShape& s) {
  if (s.heads() == 0 || s.t == 0) return;  // empty tensors may have null data
  const int64_t n = s.t * s.d;
#pragma omp parallel for schedule(static) if (s.heads() > 1 && s.heads() * n * s.t >= kParallelMinWork)
  for (int64_t bh = 0; bh < s.heads(); ++bh) forward_head(q + bh * n, k + bh * n, v + bh * n, o + bh * n, lse + bh * s.t, s);
}

template <class T>
void backward_t(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                const AttentionShape& s) {
  if (s.heads() == 0 || s.t == 0) return;
  const int64_t n = s.t * s.d;
#pragma omp parallel for schedule(static) if (s.heads() > 1 && s.heads() * n * s.t >= kParallelMinWork)
  for (int64_t bh = 0; bh < s.heads(); ++bh)
    backward_head(q + bh * n, k + bh * n, v + bh * n, o + bh * n, lse + bh * s.t, dout + bh * n, dq + bh * n,
                  dk + bh * n, dv + bh * n, s);
}

// f16/bf16 run the f32 path on widened copies.
Tensor widened(const Tensor& t) {
  Tensor r = Tensor::empty(t.shape(), DType::f32, t.device());
  convert_host(t.data_ptr(), t.dtype(), r.data_ptr(), DType::f32, t.numel());
  return r;
}
void narrow_into(const Tensor& f, Tensor& dst) {
  convert_host(f.data_ptr(), DType::f32, dst.data_ptr(), dst.dtype(), dst.numel());
}
template <class T>
const T* ptr(const Tensor& t) { return static_cast<const T*>(t.data_ptr()); }
template <class T>
T* mptr(Tensor& t) { return static_cast<T*>(t.data_ptr()); }

void check_contiguous_heads(const AttentionShape& s) {
  TANDEM_CHECK_KIND(NotSupported, !s.token_major(),
                    "causal_attention on the CPU takes contiguous [b, h, t, d] heads, not token-major rows");
}

void cpu_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                           const AttentionShape& s) {
  check_contiguous_heads(s);
  dispatch_floating(q.dtype(), "causal_attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      forward_t<T>(ptr<T>(q), ptr<T>(k), ptr<T>(v), mptr<T>(out), mptr<T>(lse), s);
    } else {
      Tensor of = Tensor::empty(out.shape(), DType::f32, out.device());
      forward_t<float>(ptr<float>(widened(q)), ptr<float>(widened(k)), ptr<float>(widened(v)), mptr<float>(of),
                       mptr<float>(lse), s);
      narrow_into(of, out);
    }
  });
}

void cpu_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv, const AttentionShape& s) {
  check_contiguous_heads(s);
  dispatch_floating(q.dtype(), "causal_attention backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      backward_t<T>(ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(out), ptr<T>(lse), ptr<T>(dout), mptr<T>(dq),
                    mptr<T>(dk), mptr<T>(dv), s);
    } else {
      Tensor f[3] = {Tensor::empty(dq.shape(), DType::f32, dq.device()), Tensor::empty(dq.shape(), DType::f32, dq.device()),
                     Tensor::empty(dq.shape(), DType::f32, dq.device())};
      backward_t<float>(ptr<float>(widened(q)), ptr<float>(widened(k)), ptr<float>(widened(v)),
                        ptr<float>(widened(out)), ptr<float>(lse), ptr<float>(widened(dout)), mptr<float>(f[0]),
                        mptr<float>(f[1]), mptr<float>(f[2]), s);
      narrow_into(f[0], dq);
      narrow_into(f[1], dk);
      narrow_into(f[2], dv);
    }
  });
}

TANDEM_REGISTER_KERNEL(attention_forward, DeviceKind::CPU, cpu_attention_forward);
TANDEM_REGISTER_KERNEL(attention_backward, DeviceKind::CPU, cpu_attention_backward);

}  // namespace
}  // namespace tandem::kernels
