// Causal attention on tensor cores, the forward: out and the rows' log-sum-exp (lse) for a query
// tile a block, flash-attention 2's loop over the key and value tiles (attention_mma_common.cuh says
// the scheme); and attention_mma_fits, the check attention.cu asks before taking this path.
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/attention_mma_common.cuh"
#include "runtime/env_settings.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// The forward's row tiles a warp owns: 1 (16 rows, a block's tile 64 rows, as the backward's) or 2
// (32 rows, 128 a block: each key and value fragment loaded from shared memory feeds twice the
// products, flash-attention 2's forward layout, at more registers a thread). Head dimensions up to
// 64 only: at 128 two tiles' accumulators alone would take 256 registers.
template <int R>
constexpr int kForwardBlockRows = kBlockRows * R;

// out, lse for query tile blockIdx.y (the last first: later queries see more keys) of head
// blockIdx.x, R row tiles of 16 a warp. Each row's arithmetic is the same whatever R: the same bits.
template <class T, int D, int R>
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                 const uint16_t* __restrict__ v, uint16_t* __restrict__ out, float* __restrict__ lse,
                                 int t, float scale_log2, kernels::HeadRows in, kernels::HeadRows io) {
  static_assert(R == 1 || (R == 2 && D <= 64), "attention forward: 32-row warps up to head dimension 64");
  constexpr int KD = D / 16, ND = D / 8, NS = kStream / 8, BR = kForwardBlockRows<R>;
  const Lane at;
  const int64_t base = in.base(blockIdx.x), base_o = io.base(blockIdx.x);
  const int q0 = int(gridDim.y - 1 - blockIdx.y) * BR, qw = q0 + 16 * R * at.warp;
  auto smem = dynamic_shared<uint16_t>();  // per stage: the key tile, then the value tile
  // Q's fragments, staged through stage 0's key tile (and its value tile, the next 64 rows, for R 2).
  TANDEM_UNROLL
  for (int r = 0; r < R; ++r) load_rows<D>(q + base, in.row, t, q0 + kBlockRows * r, smem + r * kTile<D>);
  land_staged_rows();
  FragA qa[R][KD];
  TANDEM_UNROLL
  for (int r = 0; r < R; ++r) load_warp_rows<D>(qa[r], smem, 16 * (R * at.warp + r), at.lane);
  __syncthreads();  // stage 0 is free for the first key tile
  // m in log2 units; l: this lane's share. Row tile r's rows are qw + 16 r + g and + 8.
  float m[R][2], l[R][2];
  FragD o[R][ND];  // zeros
  TANDEM_UNROLL
  for (int r = 0; r < R; ++r) {
    m[r][0] = m[r][1] = -INFINITY;
    l[r][0] = l[r][1] = 0.f;
  }
  const int key_end = q0 + BR < t ? q0 + BR : t;
  auto load = [&](int j, int stage) {
    load_rows<D>(k + base, in.row, t, j * kStream, smem + 2 * stage * kTile<D>);
    load_rows<D>(v + base, in.row, t, j * kStream, smem + (2 * stage + 1) * kTile<D>);
  };
  stream_tiles<kStages<D>>((key_end + kStream - 1) / kStream, load, [&](int j, int stage) {
    const int k0 = j * kStream;
    FragD s[R][NS];  // zeros
    TANDEM_UNROLL
    for (int kk = 0; kk < KD; ++kk) {
      FragA a[R];
      TANDEM_UNROLL
      for (int r = 0; r < R; ++r) a[r] = qa[r][kk];
      TANDEM_UNROLL
      for (int n = 0; n < NS; n += 2)
        mma_pairs<T, true, kPitch<D>>(s, a, smem + 2 * stage * kTile<D>, 16 * kk, n, at.lane);
    }
    TANDEM_UNROLL
    for (int r = 0; r < R; ++r) {
      const int qr = qw + 16 * r;
      // Only a tile with a key after some row of the row tile, or a row past t, needs the mask.
      if (k0 + kStream - 1 > qr || qr + 16 > t) mask_scores(s[r], qr, k0, t, at);
      // The scores stay unscaled until the exponent: the scale is positive (attention_mma_fits), so
      // the row max scales with them, and the scaling and the shift are one FMA.
      float mx[2] = {-INFINITY, -INFINITY};
      TANDEM_UNROLL
      for (int n = 0; n < NS; ++n)
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) mx[i / 2] = fmaxf(mx[i / 2], s[r][n].r[i]);
      float shift[2], alpha[2];
      TANDEM_UNROLL
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(m[r][h], quad_max(mx[h]) * scale_log2);
        shift[h] = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet: all weights 0
        alpha[h] = fast_exp2(m[r][h] - shift[h]);
        m[r][h] = m_new;
        l[r][h] *= alpha[h];
      }
      TANDEM_UNROLL
      for (int n = 0; n < NS; ++n)
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) {
          s[r][n].r[i] = fast_exp2(fmaf(s[r][n].r[i], scale_log2, -shift[i / 2]));
          l[r][i / 2] += s[r][n].r[i];
        }
      TANDEM_UNROLL
      for (int n = 0; n < ND; ++n)
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) o[r][n].r[i] *= alpha[i / 2];
    }
    TANDEM_UNROLL
    for (int jj = 0; jj < kStream / 16; ++jj) {
      FragA a[R];
      TANDEM_UNROLL
      for (int r = 0; r < R; ++r) a[r] = as_a<T>(s[r][2 * jj], s[r][2 * jj + 1]);
      TANDEM_UNROLL
      for (int n = 0; n < ND; n += 2)
        mma_pairs<T, false, kPitch<D>>(o, a, smem + (2 * stage + 1) * kTile<D>, 16 * jj, n, at.lane);
    }
  });
  TANDEM_UNROLL
  for (int r = 0; r < R; ++r)
    TANDEM_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(l[r][h]);
      const int row = qw + 16 * r + at.g + 8 * h;
      if (row >= t) continue;
      store_rows_half<T>(out + base_o, io.row, row, o[r], h, 1.f / sum, at.c);
      if (at.c == 0) lse[int64_t(blockIdx.x) * t + row] = (m[r][h] + log2f(sum)) / kLog2e;
    }
}

}  // namespace

bool attention_mma_fits(const kernels::AttentionShape& s, std::initializer_list<const Tensor*> tensors) {
  if (s.d != 16 && s.d != 32 && s.d != 64 && s.d != 128) return false;
  // The kernels take row maxima of unscaled scores, which scale with them only for a positive scale.
  if (!(s.scale > 0)) return false;
  // Rows as int; heads on grid.x, row tiles on grid.y (at most 65535).
  if (s.t >= (int64_t(1) << 30) || s.heads() > 0x7fffffff || (s.t + kBlockRows - 1) / kBlockRows > 65535) return false;
  for (const Tensor* x : tensors)
    if (!is_low_precision(x->dtype()) || !aligned16(x->data_ptr())) return false;
  // Every row of every operand 16-byte aligned (8 elements): its start and stride.
  for (int64_t e : {s.ld_in, s.ld_out, s.q_off, s.k_off, s.v_off})
    if (e % 8 != 0) return false;
  return true;
}

// TANDEM_ATTENTION_FORWARD_ROWS: the rows a warp owns in the forward, 16 (default) or 32 (D <= 64;
// 16 beyond), for A/B runs on a GPU. Read once; each call loads the value (tests change it in-process).
int forward_row_tiles(int64_t d) {
  static const env::Switch rows("TANDEM_ATTENTION_FORWARD_ROWS");
  const bool rows_32 = rows.index() == 1;
  return rows_32 && d <= 64 ? 2 : 1;
}

void attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                           const kernels::AttentionShape& s) {
  const float scale_log2 = static_cast<float>(s.scale) * kLog2e;
  const int row_tiles = forward_row_tiles(s.d);
  with_16bit(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(s.d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      auto launch = [&](auto r) {
        constexpr int R = decltype(r)::value;
        TANDEM_LAUNCH((attention_forward_mma_kernel<T, D, R>), grid_of(s, kForwardBlockRows<R>), kThreads,
                      kTileBytes<D>, stream_for(q.device()), bits(q, s.q_off), bits(k, s.k_off), bits(v, s.v_off),
                      bits(out),
                      static_cast<float*>(lse.data_ptr()), static_cast<int>(s.t), scale_log2,
                      kernels::head_rows(s, s.ld_in), kernels::head_rows(s, s.ld_out));
      };
      if constexpr (D <= 64) {
        if (row_tiles == 2) return launch(std::integral_constant<int, 2>{});
      }
      launch(std::integral_constant<int, 1>{});
    });
  });
}

}  // namespace tandem::TANDEM_CUDA_NS
