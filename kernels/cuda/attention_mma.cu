// Causal attention on tensor cores for 16-bit inputs: flash-attention 2's scheme over mma.sync
// (kernels/cuda/mma.cuh), f32 accumulation and softmax, no [T, T] matrix. A block is 4 warps, each
// owning 16 rows of the block's 64-row tile (queries; keys for dK/dV) as A fragments in registers,
// and streams tiles of 64 of the other side through shared memory. (The forward can give a warp 32
// rows instead, TANDEM_ATTENTION_FORWARD_ROWS: see kForwardBlockRows.) Scores stay in the product's
// registers: the softmax works on them where they are (a row's values lie in one lane quad), and
// their 16-bit rounding is the A operand of the next product (P V, dS K, P^T dO, dS^T Q), as in
// flash-attention. Backward is two kernels like the SIMT path's (dQ with delta = dO . O; then dK, dV
// per key tile): no atomics, so results do not depend on the schedule.
//
// Streamed tiles arrive by cp.async into two stages of shared memory where both fit the 48 KiB a
// launch may take (D <= 64): tile j + 1 loads while the warps compute on tile j, one barrier a tile.
// Only the tiles that straddle the diagonal or the end of the sequence pay for the mask.
//
// Masking is by selection (a future score is -inf before the max, its probability 0), so a changed
// finite future key or value changes no earlier row. Unlike the SIMT kernels, an infinite future
// value does: its 0 probability still meets it in the product (0 * inf).
#include "kernels/cuda/attention_mma.h"

#include <cmath>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/env_settings.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;  // every kernel here launches with exactly this many
constexpr int kBlockRows = 16 * kWarps;  // the block's own tile: 16 rows a warp
constexpr int kStream = 64;              // rows of the streamed tile
constexpr float kLog2e = 1.4426950408889634f;
// Tile rows are padded by 8 elements (16 bytes): the fragment loads of a quad's 8 rows then hit 32
// different banks, and rows stay 16-byte aligned for the tile loads.
template <int D>
constexpr int kPitch = D + 8;

// A shared-memory view reinterpreted as U (a raw pointer on the GPU, the emulator's checked view).
template <class U, class S>
__device__ __forceinline__ auto shared_as(S p) {
#if defined(TANDEM_SIMT_EMULATOR)
  return p.template as<U>();
#else
  return reinterpret_cast<U*>(p);
#endif
}

// Stages of the streamed tiles: two where a kernel's fit in 48 KiB, else one.
template <int D>
constexpr int kStages = D <= 64 ? 2 : 1;
// 16-bit elements of one streamed tile.
template <int D>
constexpr int kTile = kStream * kPitch<D>;

// Issues the copies of rows [r0, r0 + kBlockRows) of x (t rows of D 16-bit values, ld apart) into
// tile [kBlockRows][D + 8], zeros for rows past t (their scores are masked; zeros keep their
// products finite), 16 bytes a copy: thread i copies column chunk i % (D / 8) of every
// (kThreads / (D / 8))-th row from row i / (D / 8), in an unrolled loop (a loop over blockDim.x
// cost more integer instructions than the copies). The caller commits and waits.
template <int D, class S>
__device__ __forceinline__ void load_rows(const uint16_t* __restrict__ x, int64_t ld, int t, int r0, S tile) {
  constexpr int chunks = D / 8, rows_per_pass = kThreads / chunks;
  static_assert(kThreads % chunks == 0 && kBlockRows % rows_per_pass == 0, "load_rows: uneven passes");
  const int r = int(threadIdx.x) / chunks, c = int(threadIdx.x) % chunks;
  TANDEM_UNROLL
  for (int pass = 0; pass < kBlockRows / rows_per_pass; ++pass) {
    const int row = r + pass * rows_per_pass;
    const bool inside = r0 + row < t;
    cp_async_16(tile + row * kPitch<D> + c * 8, inside ? x + int64_t(r0 + row) * ld + c * 8 : x, inside);
  }
}

// The block's own rows staged through shared memory: the copies issued by load_rows land and every
// thread sees them.
__device__ __forceinline__ void land_staged_rows() {
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// body(j, stage) for the n tiles of a stream, tile j loaded into stage j % Stages by load(j, stage)
// (issuing copies). With two stages tile j + 1's copies are in flight while body works on tile j;
// one barrier a tile then covers both hazards: tile j has landed for every thread, and every thread
// is done with tile j - 1, whose stage tile j + 1 overwrites. The caller syncs before the call if
// stage 0 held anything still being read.
template <int Stages, class Load, class Body>
__device__ __forceinline__ void stream_tiles(int n, Load&& load, Body&& body) {
  static_assert(Stages == 1 || Stages == 2, "stream_tiles: one or two stages");
  if constexpr (Stages == 2) {
    load(0, 0);
    cp_async_commit();
  }
  for (int j = 0; j < n; ++j) {
    if constexpr (Stages == 1) {
      __syncthreads();  // every warp is done with the previous tile
      load(j, 0);
      cp_async_commit();
    }
    cp_async_wait<0>();  // tile j: the only group in flight
    __syncthreads();
    if constexpr (Stages == 2) {
      if (j + 1 < n) load(j + 1, (j + 1) % 2);
      cp_async_commit();
    }
    body(j, j % Stages);
  }
}

// A fragment of rows [r0, r0 + 16), columns [k0, k0 + 16) of a row-major tile.
template <int P, class S>
__device__ __forceinline__ FragA load_a(S tile, int r0, int k0, int lane) {
  FragA a;
  ldmatrix_x4<false>(a.r, tile, (r0 + (lane & 7) + (lane >> 3 & 1) * 8) * P + k0 + (lane >> 4) * 8);
  return a;
}

// B fragments of the 8-column tiles n0 and n0 + 8 over k [k0, k0 + 16), where B[k][n] = tile[n][k]:
// the tile's rows are B's columns (K in Q K^T), read as they lie.
template <int P, class S>
__device__ __forceinline__ void load_b_rows(FragB& lo, FragB& hi, S tile, int n0, int k0, int lane) {
  uint32_t r[4];
  ldmatrix_x4<false>(r, tile, (n0 + (lane & 7) + (lane >> 4) * 8) * P + k0 + (lane >> 3 & 1) * 8);
  lo = FragB{{r[0], r[1]}};
  hi = FragB{{r[2], r[3]}};
}

// The same where B[k][n] = tile[k][n] (V in P V): read transposed.
template <int P, class S>
__device__ __forceinline__ void load_b_cols(FragB& lo, FragB& hi, S tile, int k0, int n0, int lane) {
  uint32_t r[4];
  ldmatrix_x4<true>(r, tile, (k0 + (lane & 7) + (lane >> 3 & 1) * 8) * P + n0 + (lane >> 4) * 8);
  lo = FragB{{r[0], r[1]}};
  hi = FragB{{r[2], r[3]}};
}

// acc[n], acc[n + 1] += a B for the 8-column tiles n and n + 1 (B's two fragments from one load).
template <class T, bool RowsAreColumns, int P, class S>
__device__ __forceinline__ void mma_pair(FragD& lo, FragD& hi, const FragA& a, S tile, int tile_k0, int n0, int lane) {
  FragB b_lo, b_hi;
  if constexpr (RowsAreColumns) load_b_rows<P>(b_lo, b_hi, tile, n0, tile_k0, lane);
  else load_b_cols<P>(b_lo, b_hi, tile, tile_k0, n0, lane);
  mma<T>(lo, a, b_lo);
  mma<T>(hi, a, b_hi);
}

// acc[r][n], acc[r][n + 1] += a[r] B for each of a warp's R row tiles: B's two fragments loaded from
// shared memory once for all R (the forward's 32-row warps: half the fragment loads a product).
template <class T, bool RowsAreColumns, int P, int R, int N, class S>
__device__ __forceinline__ void mma_pairs(FragD (&acc)[R][N], const FragA (&a)[R], S tile, int tile_k0, int n,
                                          int lane) {
  FragB b_lo, b_hi;
  if constexpr (RowsAreColumns) load_b_rows<P>(b_lo, b_hi, tile, 8 * n, tile_k0, lane);
  else load_b_cols<P>(b_lo, b_hi, tile, tile_k0, 8 * n, lane);
  TANDEM_UNROLL
  for (int r = 0; r < R; ++r) {
    mma<T>(acc[r][n], a[r], b_lo);
    mma<T>(acc[r][n + 1], a[r], b_hi);
  }
}

// Score tiles 2j and 2j + 1 (8 columns each) rounded to T: the A fragment of k step j.
template <class T>
__device__ __forceinline__ FragA as_a(const FragD& left, const FragD& right) {
  return FragA{{pack2<T>(left.r[0], left.r[1]), pack2<T>(left.r[2], left.r[3]), pack2<T>(right.r[0], right.r[1]),
                pack2<T>(right.r[2], right.r[3])}};
}

// The A fragments of the warp's 16 rows of a tile (from row r0), over all D columns.
template <int D, class S>
__device__ __forceinline__ void load_warp_rows(FragA (&a)[D / 16], S tile, int r0, int lane) {
  TANDEM_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) a[kk] = load_a<kPitch<D>>(tile, r0, 16 * kk, lane);
}

// s[n] += a . (the streamed tile's rows 8n .. 8n + 7) over D: the warp's rows scored against the
// tile's rows (S = Q K^T, dP = dO V^T; S^T = K Q^T, dP^T = V dO^T for dK/dV).
template <class T, int D, class S>
__device__ __forceinline__ void score_tile(FragD (&s)[kStream / 8], const FragA (&a)[D / 16], S tile, int lane) {
  TANDEM_UNROLL
  for (int kk = 0; kk < D / 16; ++kk)
    TANDEM_UNROLL
    for (int n = 0; n < kStream / 8; n += 2)
      mma_pair<T, true, kPitch<D>>(s[n], s[n + 1], a[kk], tile, 16 * kk, 8 * n, lane);
}

// acc += w . tile: the warp's [16, kStream] weights (score fragments, rounded to T) times the
// streamed tile's rows (P V, dS K; P^T dO, dS^T Q for dK/dV).
template <class T, int D, class S>
__device__ __forceinline__ void accumulate_tile(FragD (&acc)[D / 8], const FragD (&w)[kStream / 8], S tile, int lane) {
  TANDEM_UNROLL
  for (int j = 0; j < kStream / 16; ++j) {
    const FragA a = as_a<T>(w[2 * j], w[2 * j + 1]);
    TANDEM_UNROLL
    for (int n = 0; n < D / 8; n += 2) mma_pair<T, false, kPitch<D>>(acc[n], acc[n + 1], a, tile, 16 * j, 8 * n, lane);
  }
}

// v summed (or maxed) over the lane's quad: the four lanes holding one row of a D fragment.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}

// 2^x in one special-function instruction (ex2.approx.ftz: ~2 ulp, results below 2^-126 are 0,
// 2^-inf is 0). exp2f's handling of subnormal results cost three more instructions a probability;
// a probability under 2^-126 is 0 in every product it enters anyway.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

// Row g (h = 0) or g + 8 (h = 1) of a warp's D fragments (times mul) into row `row` of dst (rows ld
// apart).
template <class T, int ND>
__device__ __forceinline__ void store_rows_half(uint16_t* dst, int64_t ld, int64_t row, const FragD (&acc)[ND], int h,
                                                float mul, int c) {
  TANDEM_UNROLL
  for (int n = 0; n < ND; ++n)
    reinterpret_cast<uint32_t*>(dst + row * ld + n * 8 + 2 * c)[0] =
        pack2<T>(acc[n].r[2 * h] * mul, acc[n].r[2 * h + 1] * mul);
}

struct Lane {
  int lane, warp, g, c;
  __device__ Lane()
      : lane(int(threadIdx.x % 32)), warp(int(threadIdx.x / 32)), g(int(threadIdx.x % 32) / 4),
        c(int(threadIdx.x % 32) % 4) {}
  // The row (within 16) of fragment element i, and its column (within 8).
  __device__ int row(int i) const { return g + (i >= 2 ? 8 : 0); }
  __device__ int col(int i) const { return 2 * c + i % 2; }
};

// Scores of the warp's rows [r0, r0 + 16) against keys [k0, k0 + kStream) set to -inf where the key
// is after the row or the row is past t. Called only for tiles that have such scores.
__device__ __forceinline__ void mask_scores(FragD (&s)[kStream / 8], int r0, int k0, int t, const Lane& at) {
  TANDEM_UNROLL
  for (int n = 0; n < kStream / 8; ++n)
    TANDEM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int row = r0 + at.row(i), key = k0 + 8 * n + at.col(i);
      if (key > row || row >= t) s[n].r[i] = -INFINITY;
    }
}

// The same for the transposed scores of the warp's keys [k0, k0 + 16) against queries
// [q0, q0 + kStream): -inf where the query is before the key or past t.
__device__ __forceinline__ void mask_transposed_scores(FragD (&s)[kStream / 8], int k0, int q0, int t,
                                                       const Lane& at) {
  TANDEM_UNROLL
  for (int n = 0; n < kStream / 8; ++n)
    TANDEM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int key = k0 + at.row(i), query = q0 + 8 * n + at.col(i);
      if (query < key || query >= t) s[n].r[i] = -INFINITY;
    }
}

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

// f(std::integral_constant<int, D>) for the head dimensions the kernels are built for.
template <class F>
void with_head_dim(int64_t d, F&& f) {
  switch (d) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: TANDEM_FAIL(NotSupported, "causal_attention on tensor cores: head dimension {} (16, 32, 64, 128)", d);
  }
}

template <class F>
void with_16bit(DType dt, F&& f) {
  if (dt == DType::bf16) return f(bfloat16{});
  TANDEM_CHECK_KIND(NotSupported, dt == DType::f16, "causal_attention on tensor cores: bf16 or f16, got {}",
                    dtype_name(dt));
  return f(half{});
}

// Dynamic shared memory of the kernels for head dimension D: the stages' two tiles, and for the
// dK/dV kernel each stage's stats.
template <int D>
constexpr size_t kTileBytes = size_t(kStages<D>) * 2 * kTile<D> * sizeof(uint16_t);
template <int D>
constexpr size_t kStatBytes = size_t(kStages<D>) * 2 * kStream * sizeof(float);
static_assert(kTileBytes<128> + kStatBytes<128> <= 48 * 1024 && kTileBytes<64> + kStatBytes<64> <= 48 * 1024,
              "attention tiles past the 48 KiB a launch takes without opting in");
// A block per head and tile of `block_rows` rows (the forward's may be kForwardBlockRows<2>).
dim3 grid_of(const kernels::AttentionShape& s, int block_rows = kBlockRows) {
  return dim3(static_cast<unsigned>(s.heads()), static_cast<unsigned>((s.t + block_rows - 1) / block_rows));
}
const uint16_t* bits(const Tensor& x, int64_t offset = 0) { return static_cast<const uint16_t*>(x.data_ptr()) + offset; }
uint16_t* bits(Tensor& x, int64_t offset = 0) { return static_cast<uint16_t*>(x.data_ptr()) + offset; }

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
