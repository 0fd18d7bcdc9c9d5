// Causal attention on bf16 operands through the CPU's bf16 GEMM (AMX tiles), the way the CUDA
// kernels compute it under autocast: products of bf16 operands summed in f32, the softmax in f32,
// the probabilities (and the backward's dS) rounded to bf16 for the products they feed. Per (batch,
// head) and block of kBlockQ queries, each product spans every key the block sees: the GEMM's
// packing is paid once per block, not per small tile, and the scores are a [kBlockQ, t] buffer (never
// [t, t]). Threads take whole heads, as the f32 kernels do.
#include "kernels/cpu/attention_bf16.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/eigen.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/lanes.h"
#include "runtime/backend/gemm.h"
#include "runtime/tensor.h"

namespace tandem::kernels {
namespace {

// 128 queries a block: fewer, larger products (the GEMM packs each operand once a call), at the cost
// of computing up to half a block of masked scores. Forward + backward, one thread, interleaved
// medians at blocks of 32 / 64 / 128 / 256: [8, 4, 128, 64] 5.07 / 3.97 / 3.52 / 3.52 ms,
// [1, 12, 1024, 64] 42.2 / 37.7 / 34.3 / 37.8 ms, [2, 4, 200, 128] 3.38 / 2.70 / 2.30 / 2.48 ms (the
// widened f32 kernels: 4.52, 65.5 and 4.68 ms).
constexpr int64_t kBlockQ = 128;

// C [m, n] (f32, row stride ldc) = alpha op(A) op(B) + beta C, A and B bf16 with row strides lda, ldb.
void product(const bfloat16* a, int64_t lda, bool ta, const bfloat16* b, int64_t ldb, bool tb, float* c, int64_t ldc,
             int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  GemmArgs g;
  g.dtype = DType::bf16;
  g.wide_c = true;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.alpha = alpha;
  g.beta = beta;
  gemm(kCPU)(kCPU, g);
}

void to_bf16(const float* src, bfloat16* dst, int64_t n) { convert_host(src, DType::f32, dst, DType::bf16, n); }

// Row i of the [qb, kn] scores of queries q0.. against keys 0..kn-1: exp(score - shift) for the
// keys the query sees (j <= q0 + i), exactly 0 after them.
void exp_row(float* row, int64_t q0, int64_t i, int64_t kn, float shift) {
  const int64_t seen = q0 + i + 1;
  Eigen::Map<Eigen::ArrayXf> r(row, seen);
  r = (r - shift).exp();
  std::fill(row + seen, row + kn, 0.f);
}

// One head: q, k, v rows ld apart, out rows ld_o apart, lse [t].
void forward_head(const bfloat16* q, const bfloat16* k, const bfloat16* v, bfloat16* out, float* lse, int64_t ld,
                  int64_t ld_o, const AttentionShape& s) {
  const int64_t t = s.t, d = s.d;
  for (int64_t q0 = 0; q0 < t; q0 += kBlockQ) {
    const int64_t qb = std::min(kBlockQ, t - q0), kn = q0 + qb;  // the block sees keys [0, kn)
    float* S = thread_scratch<float>(Scratch::AttnScores, qb * kn);
    bfloat16* P = thread_scratch<bfloat16>(Scratch::AttnScores, qb * kn);
    float* O = thread_scratch<float>(Scratch::AttnRows, qb * d);
    float* m = thread_scratch<float>(Scratch::AttnMax, qb);
    float* l = thread_scratch<float>(Scratch::AttnSum, qb);
    product(q + q0 * ld, ld, false, k, ld, true, S, kn, qb, kn, d, s.scale, 0);
    for (int64_t i = 0; i < qb; ++i) {
      float* row = S + i * kn;
      m[i] = Eigen::Map<Eigen::ArrayXf>(row, q0 + i + 1).maxCoeff();
      exp_row(row, q0, i, kn, m[i]);
      // Of the f32 probabilities, as the GPU's; in a fixed order (Eigen's sum() follows the row's
      // alignment: with it a resumed run came out with other bits than the one that never stopped).
      l[i] = sum_of<float>(row, kn);
      to_bf16(row, P + i * kn, kn);
    }
    product(P, kn, false, v, ld, false, O, d, qb, d, kn, 1, 0);
    for (int64_t i = 0; i < qb; ++i) {
      Eigen::Map<Eigen::ArrayXf> oi(O + i * d, d);
      oi *= 1.f / l[i];
      to_bf16(O + i * d, out + (q0 + i) * ld_o, d);
      lse[q0 + i] = m[i] + std::log(l[i]);
    }
  }
}

// One head: per query block, the probabilities again from lse, then dV += P^T dO, dP = dO V^T,
// dS = P (dP - delta) scale, dQ = dS K (the block's rows, whole), dK += dS^T Q; dK and dV summed in
// f32 over the blocks and rounded once.
void backward_head(const bfloat16* q, const bfloat16* k, const bfloat16* v, const bfloat16* o, const float* lse,
                   const bfloat16* dout, bfloat16* dq, bfloat16* dk, bfloat16* dv, int64_t ld, int64_t ld_o,
                   const AttentionShape& s) {
  const int64_t t = s.t, d = s.d;
  const float scale = static_cast<float>(s.scale);
  float* delta = thread_scratch<float>(Scratch::AttnDelta, t);  // dO_i . O_i, the softmax backward's row term
  for (int64_t i = 0; i < t; ++i) {
    float sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += float(dout[i * ld_o + j]) * float(o[i * ld_o + j]);
    delta[i] = sum;
  }
  float* dK = thread_scratch<float>(Scratch::AttnKeyGrad, t * d);
  float* dV = thread_scratch<float>(Scratch::AttnValueGrad, t * d);
  std::fill(dK, dK + t * d, 0.f);
  std::fill(dV, dV + t * d, 0.f);
  for (int64_t q0 = 0; q0 < t; q0 += kBlockQ) {
    const int64_t qb = std::min(kBlockQ, t - q0), kn = q0 + qb;
    float* S = thread_scratch<float>(Scratch::AttnScores, qb * kn);
    float* dP = thread_scratch<float>(Scratch::AttnScoresGrad, qb * kn);
    bfloat16* P = thread_scratch<bfloat16>(Scratch::AttnScores, qb * kn);
    bfloat16* dS = thread_scratch<bfloat16>(Scratch::AttnScoresGrad, qb * kn);
    float* dQ = thread_scratch<float>(Scratch::AttnRows, qb * d);
    const bfloat16* dO = dout + q0 * ld_o;
    product(q + q0 * ld, ld, false, k, ld, true, S, kn, qb, kn, d, s.scale, 0);
    for (int64_t i = 0; i < qb; ++i) {
      exp_row(S + i * kn, q0, i, kn, lse[q0 + i]);
      to_bf16(S + i * kn, P + i * kn, kn);
    }
    product(P, kn, true, dO, ld_o, false, dV, d, kn, d, qb, 1, 1);
    product(dO, ld_o, false, v, ld, true, dP, kn, qb, kn, d, 1, 0);
    for (int64_t i = 0; i < qb; ++i) {
      const int64_t seen = q0 + i + 1;
      Eigen::Map<Eigen::ArrayXf> p(S + i * kn, seen), g(dP + i * kn, seen);
      g = p * (g - delta[q0 + i]) * scale;
      std::fill(dP + i * kn + seen, dP + i * kn + kn, 0.f);  // not p * dP: a future value may be inf
      to_bf16(dP + i * kn, dS + i * kn, kn);
    }
    product(dS, kn, false, k, ld, false, dQ, d, qb, d, kn, 1, 0);
    for (int64_t i = 0; i < qb; ++i) to_bf16(dQ + i * d, dq + (q0 + i) * ld, d);
    product(dS, kn, true, q + q0 * ld, ld, false, dK, d, kn, d, qb, 1, 1);
  }
  for (int64_t i = 0; i < t; ++i) {
    to_bf16(dK + i * d, dk + i * ld, d);
    to_bf16(dV + i * d, dv + i * ld, d);
  }
}

}  // namespace

bool attention_bf16_on_tiles() { return std::string_view(cpu_bf16_gemm_path()) == "amx-bf16"; }

void attention_forward_bf16(const bfloat16* q, const bfloat16* k, const bfloat16* v, bfloat16* out, float* lse,
                            const AttentionShape& s) {
  for_each_head(s, [&](int64_t bh, int64_t b, int64_t bo, int64_t ld, int64_t ld_o) {
    forward_head(q + s.q_off + b, k + s.k_off + b, v + s.v_off + b, out + bo, lse + bh * s.t, ld, ld_o, s);
  });
}

void attention_backward_bf16(const bfloat16* q, const bfloat16* k, const bfloat16* v, const bfloat16* out,
                             const float* lse, const bfloat16* dout, bfloat16* dq, bfloat16* dk, bfloat16* dv,
                             const AttentionShape& s) {
  for_each_head(s, [&](int64_t bh, int64_t b, int64_t bo, int64_t ld, int64_t ld_o) {
    backward_head(q + s.q_off + b, k + s.k_off + b, v + s.v_off + b, out + bo, lse + bh * s.t, dout + bo,
                  dq + s.q_off + b, dk + s.k_off + b, dv + s.v_off + b, ld, ld_o, s);
  });
}

}  // namespace tandem::kernels
