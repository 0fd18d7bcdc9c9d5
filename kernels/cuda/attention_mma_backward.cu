// Causal attention on tensor cores, the backward (attention_mma_common.cuh says the scheme): two
// kernels, dQ per query tile with delta = dO . O, then dK and dV per key tile, so no atomics and
// results that do not depend on the schedule.
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/attention_mma_common.cuh"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// A warp's rows' lse (in log2 units) and delta = dO . O for rows g and g + 8; the lanes of a quad
// each sum a quarter of the columns. Also stores both into the head's row of stats ([2][tp] floats
// a head, tp the row tiles' span: zeros past t), which the dK/dV kernel streams.
template <class T, int D>
__device__ void row_stats(const T* __restrict__ o, const T* __restrict__ dout, const float* __restrict__ lse,
                          float* __restrict__ stats, int64_t base_o, int64_t ld_o, int qw, int t, const Lane& at,
                          float (&lse2)[2], float (&dl)[2]) {
  const int tp = int(gridDim.y) * kBlockRows;
  float* __restrict__ head_stats = stats + int64_t(blockIdx.x) * 2 * tp;
  TANDEM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = qw + at.g + 8 * h;
    float part = 0.f;
    if (row < t)
      for (int j = at.c * (D / 4); j < (at.c + 1) * (D / 4); ++j)
        part += float(to_acc(o[base_o + row * ld_o + j])) * float(to_acc(dout[base_o + row * ld_o + j]));
    dl[h] = quad_sum(part);
    lse2[h] = row < t ? lse[int64_t(blockIdx.x) * t + row] * kLog2e : 0.f;
    if (at.c == 0) {
      head_stats[row] = lse2[h];
      head_stats[tp + row] = dl[h];
    }
  }
}

// dQ for query tile blockIdx.y: dS = P (dP - delta) with dP = dO V^T, dQ = scale * dS K.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                     const uint16_t* __restrict__ v, const T* __restrict__ o,
                                     const float* __restrict__ lse, const T* __restrict__ dout,
                                     uint16_t* __restrict__ dq, float* __restrict__ stats, int t, float scale_log2,
                                     float scale, kernels::HeadRows in, kernels::HeadRows io) {
  constexpr int KD = D / 16, ND = D / 8, NS = kStream / 8;
  const Lane at;
  const int64_t base = in.base(blockIdx.x), base_o = io.base(blockIdx.x);
  const int q0 = int(gridDim.y - 1 - blockIdx.y) * kBlockRows, qw = q0 + 16 * at.warp;
  auto smem = dynamic_shared<uint16_t>();  // per stage: the key tile, then the value tile
  load_rows<D>(q + base, in.row, t, q0, smem);  // Q's and dO's fragments, staged through stage 0
  load_rows<D>(reinterpret_cast<const uint16_t*>(dout) + base_o, io.row, t, q0, smem + kTile<D>);
  land_staged_rows();
  FragA qa[KD], da[KD];
  load_warp_rows<D>(qa, smem, 16 * at.warp, at.lane);
  load_warp_rows<D>(da, smem + kTile<D>, 16 * at.warp, at.lane);
  __syncthreads();  // stage 0 is free for the first key and value tiles
  float lse2[2], dl[2];
  row_stats<T, D>(o, dout, lse, stats, base_o, io.row, qw, t, at, lse2, dl);
  FragD acc[ND];
  const int key_end = q0 + kBlockRows < t ? q0 + kBlockRows : t;
  auto load = [&](int j, int stage) {
    load_rows<D>(k + base, in.row, t, j * kStream, smem + 2 * stage * kTile<D>);
    load_rows<D>(v + base, in.row, t, j * kStream, smem + (2 * stage + 1) * kTile<D>);
  };
  stream_tiles<kStages<D>>((key_end + kStream - 1) / kStream, load, [&](int j, int stage) {
    const int k0 = j * kStream;
    FragD s[NS], dp[NS];
    score_tile<T, D>(s, qa, smem + 2 * stage * kTile<D>, at.lane);
    score_tile<T, D>(dp, da, smem + (2 * stage + 1) * kTile<D>, at.lane);
    if (k0 + kStream - 1 > qw || qw + 16 > t) mask_scores(s, qw, k0, t, at);  // P = 2^-inf = 0 there
    TANDEM_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float p = fast_exp2(fmaf(s[n].r[i], scale_log2, -lse2[i / 2]));
        s[n].r[i] = p * (dp[n].r[i] - dl[i / 2]);  // dS, in place of the scores
      }
    accumulate_tile<T, D>(acc, s, smem + 2 * stage * kTile<D>, at.lane);
  });
  TANDEM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = qw + at.g + 8 * h;
    if (row < t) store_rows_half<T>(dq + base, in.row, row, acc, h, scale, at.c);
  }
}

// dK, dV for key tile blockIdx.y (tile 0, seen by every query, first): the query tiles from its own
// on stream through. dV = P^T dO, dK = scale * dS^T Q, with the transposed scores S^T = K Q^T.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkv_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                      const uint16_t* __restrict__ v, const float* __restrict__ stats,
                                      const uint16_t* __restrict__ dout, uint16_t* __restrict__ dk,
                                      uint16_t* __restrict__ dv, int t, float scale_log2, float scale,
                                      kernels::HeadRows in, kernels::HeadRows io) {
  constexpr int KD = D / 16, ND = D / 8, NS = kStream / 8;
  const Lane at;
  // The head's offsets once, here: a 64-bit division in the loop below cost the D = 128 kernel spills.
  const int64_t base = in.base(blockIdx.x), ld = in.row, ld_o = io.row;
  const uint16_t* __restrict__ dout_h = dout + io.base(blockIdx.x);
  const int tp = int(gridDim.y) * kBlockRows;
  const float* __restrict__ head_stats = stats + int64_t(blockIdx.x) * 2 * tp;
  const int k0 = int(blockIdx.y) * kBlockRows, kw = k0 + 16 * at.warp;
  // Per stage: the query tile, then the dO tile; after every stage's tiles, each stage's queries'
  // lse (log2 units) and delta.
  auto smem = dynamic_shared<uint16_t>();
  auto stat_tiles = shared_as<float>(smem + 2 * kStages<D> * kTile<D>);
  load_rows<D>(k + base, ld, t, k0, smem);  // K's and V's fragments, staged through stage 0
  load_rows<D>(v + base, ld, t, k0, smem + kTile<D>);
  land_staged_rows();
  FragA ka[KD], va[KD];
  load_warp_rows<D>(ka, smem, 16 * at.warp, at.lane);
  load_warp_rows<D>(va, smem + kTile<D>, 16 * at.warp, at.lane);
  __syncthreads();  // stage 0 is free for the first query and dO tiles
  FragD dk_acc[ND], dv_acc[ND];
  auto load = [&](int j, int stage) {
    const int i0 = k0 + j * kStream;
    load_rows<D>(q + base, ld, t, i0, smem + 2 * stage * kTile<D>);
    load_rows<D>(dout_h, ld_o, t, i0, smem + (2 * stage + 1) * kTile<D>);
    constexpr int per_row = kStream / 4;  // 16-byte copies of one stats row's tile
    const int i = int(threadIdx.x);
    if (i < 2 * per_row)
      cp_async_16(stat_tiles + (2 * stage + i / per_row) * kStream + 4 * (i % per_row),
                  head_stats + (i / per_row) * tp + i0 + 4 * (i % per_row), true);
  };
  stream_tiles<kStages<D>>((t - k0 + kStream - 1) / kStream, load, [&](int j, int stage) {
    const int i0 = k0 + j * kStream;
    auto qs = smem + 2 * stage * kTile<D>;
    auto dos = qs + kTile<D>;
    auto lse2s = stat_tiles + 2 * stage * kStream;
    auto deltas = lse2s + kStream;
    FragD s[NS], dp[NS];
    score_tile<T, D>(s, ka, qs, at.lane);
    score_tile<T, D>(dp, va, dos, at.lane);
    // Only a tile with a query before some key of the warp, or a query past t, needs the mask.
    if (i0 < kw + 15 || i0 + kStream > t) mask_transposed_scores(s, kw, i0, t, at);
    TANDEM_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int col = 8 * n + at.col(i);
        const float p = fast_exp2(fmaf(s[n].r[i], scale_log2, -float(lse2s[col])));  // 0 where masked
        s[n].r[i] = p;
        dp[n].r[i] = p * (dp[n].r[i] - float(deltas[col]));  // dS^T
      }
    accumulate_tile<T, D>(dv_acc, s, dos, at.lane);  // P^T dO
    accumulate_tile<T, D>(dk_acc, dp, qs, at.lane);   // dS^T Q
  });
  TANDEM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int key = kw + at.g + 8 * h;
    if (key >= t) continue;
    store_rows_half<T>(dk + base, ld, key, dk_acc, h, scale, at.c);
    store_rows_half<T>(dv + base, ld, key, dv_acc, h, 1.f, at.c);
  }
}

}  // namespace

void attention_backward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv, const kernels::AttentionShape& s) {
  const float scale = static_cast<float>(s.scale), scale_log2 = scale * kLog2e;
  with_16bit(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(s.d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      Stream stream = stream_for(q.device());
      // Per head, the queries' lse in log2 units and delta, each over the row tiles' span.
      const dim3 grid = grid_of(s);
      Tensor stats = Tensor::empty({s.heads(), 2, int64_t(grid.y) * kBlockRows}, DType::f32, q.device());
      float* stats_p = static_cast<float*>(stats.data_ptr());
      const kernels::HeadRows in = kernels::head_rows(s, s.ld_in), io = kernels::head_rows(s, s.ld_out);
      TANDEM_LAUNCH(attention_backward_dq_mma_kernel<T, D>, grid, kThreads, kTileBytes<D>, stream,
                    bits(q, s.q_off), bits(k, s.k_off), bits(v, s.v_off), static_cast<const T*>(out.data_ptr()),
                    static_cast<const float*>(lse.data_ptr()), static_cast<const T*>(dout.data_ptr()),
                    bits(dq, s.q_off), stats_p, static_cast<int>(s.t), scale_log2, scale, in, io);
      TANDEM_LAUNCH(attention_backward_dkv_mma_kernel<T, D>, grid, kThreads, kTileBytes<D> + kStatBytes<D>,
                    stream, bits(q, s.q_off), bits(k, s.k_off), bits(v, s.v_off),
                    static_cast<const float*>(stats_p), bits(dout), bits(dk, s.k_off), bits(dv, s.v_off),
                    static_cast<int>(s.t), scale_log2, scale, in, io);
    });
  });
}

}  // namespace tandem::TANDEM_CUDA_NS
