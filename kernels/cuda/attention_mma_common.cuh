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
//
// This header holds what the forward (attention_mma_forward.cu) and the backward
// (attention_mma_backward.cu) share: the tile geometry, the staged and streamed tile loads, the
// fragment products, the masks, and the host side's dispatch over dtype and head dimension.
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/attention.h"

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
inline dim3 grid_of(const kernels::AttentionShape& s, int block_rows = kBlockRows) {
  return dim3(static_cast<unsigned>(s.heads()), static_cast<unsigned>((s.t + block_rows - 1) / block_rows));
}
inline const uint16_t* bits(const Tensor& x, int64_t offset = 0) {
  return static_cast<const uint16_t*>(x.data_ptr()) + offset;
}
inline uint16_t* bits(Tensor& x, int64_t offset = 0) { return static_cast<uint16_t*>(x.data_ptr()) + offset; }

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
