// Causal attention on tensor cores for 16-bit inputs: flash-attention 2's scheme over mma.sync
// (kernels/cuda/mma.cuh), f32 accumulation and softmax, no [T, T] matrix. A block is 4 warps, each
// owning 16 rows of the block's 64-row tile (queries; keys for dK/dV) as A fragments in registers,
// and streams tiles of 64 of the other side through shared memory. Scores stay in the product's
// registers: the softmax works on them where they are (a row's values lie in one lane quad), and
// their 16-bit rounding is the A operand of the next product (P V, dS K, P^T dO, dS^T Q), as in
// flash-attention. Backward is two kernels like the SIMT path's (dQ with delta = dO . O; then dK, dV
// per key tile): no atomics, so results do not depend on the schedule.
//
// Masking is by selection (a future score is -inf before the max, its probability 0), so a changed
// finite future key or value changes no earlier row. Unlike the SIMT kernels, an infinite future
// value does: its 0 probability still meets it in the product (0 * inf).
#include "kernels/cuda/attention_mma.h"

#include <cmath>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/reduce.cuh"

namespace tandem::TANDEM_CUDA_NS {
namespace {

#if defined(__CUDACC__)
#define TANDEM_MMA_UNROLL _Pragma("unroll")
#else
#define TANDEM_MMA_UNROLL
#endif

constexpr int kWarps = 4;
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

// Rows [r0, r0 + kBlockRows) of x (t rows of D 16-bit values, ld apart) into tile
// [kBlockRows][D + 8], zero rows past t (their scores are masked; zeros keep their products finite),
// 16 bytes a load.
template <int D, class S>
__device__ void load_rows(const uint16_t* __restrict__ x, int64_t ld, int t, int r0, S tile) {
  using V = Pack<uint16_t, 8>;
  constexpr int steps = D / 8;
  for (int i = int(threadIdx.x); i < kBlockRows * steps; i += int(blockDim.x)) {
    const int r = i / steps, c = i % steps;
    V p{};
    if (r0 + r < t) p = reinterpret_cast<const V*>(x + int64_t(r0 + r) * ld)[c];
    shared_as<V>(tile + r * kPitch<D> + c * 8)[0] = p;
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

// Score tiles 2j and 2j + 1 (8 columns each) rounded to T: the A fragment of k step j.
template <class T>
__device__ __forceinline__ FragA as_a(const FragD& left, const FragD& right) {
  return FragA{{pack2<T>(left.r[0], left.r[1]), pack2<T>(left.r[2], left.r[3]), pack2<T>(right.r[0], right.r[1]),
                pack2<T>(right.r[2], right.r[3])}};
}

// The A fragments of the warp's 16 rows of a tile (from row r0), over all D columns.
template <int D, class S>
__device__ __forceinline__ void load_warp_rows(FragA (&a)[D / 16], S tile, int r0, int lane) {
  TANDEM_MMA_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) a[kk] = load_a<kPitch<D>>(tile, r0, 16 * kk, lane);
}

// s[n] += a . (the streamed tile's rows 8n .. 8n + 7) over D: the warp's rows scored against the
// tile's rows (S = Q K^T, dP = dO V^T; S^T = K Q^T, dP^T = V dO^T for dK/dV).
template <class T, int D, class S>
__device__ __forceinline__ void score_tile(FragD (&s)[kStream / 8], const FragA (&a)[D / 16], S tile, int lane) {
  TANDEM_MMA_UNROLL
  for (int kk = 0; kk < D / 16; ++kk)
    TANDEM_MMA_UNROLL
    for (int n = 0; n < kStream / 8; n += 2)
      mma_pair<T, true, kPitch<D>>(s[n], s[n + 1], a[kk], tile, 16 * kk, 8 * n, lane);
}

// acc += w . tile: the warp's [16, kStream] weights (score fragments, rounded to T) times the
// streamed tile's rows (P V, dS K; P^T dO, dS^T Q for dK/dV).
template <class T, int D, class S>
__device__ __forceinline__ void accumulate_tile(FragD (&acc)[D / 8], const FragD (&w)[kStream / 8], S tile, int lane) {
  TANDEM_MMA_UNROLL
  for (int j = 0; j < kStream / 16; ++j) {
    const FragA a = as_a<T>(w[2 * j], w[2 * j + 1]);
    TANDEM_MMA_UNROLL
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

// Row g (h = 0) or g + 8 (h = 1) of a warp's D fragments (times mul) into row `row` of dst (rows ld
// apart).
template <class T, int ND>
__device__ __forceinline__ void store_rows_half(uint16_t* dst, int64_t ld, int64_t row, const FragD (&acc)[ND], int h,
                                                float mul, int c) {
  TANDEM_MMA_UNROLL
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

// out, lse for query tile blockIdx.y (the last first: later queries see more keys) of head blockIdx.x.
template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_forward_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                 const uint16_t* __restrict__ v, uint16_t* __restrict__ out, float* __restrict__ lse,
                                 int t, float scale_log2, kernels::HeadRows in, kernels::HeadRows io) {
  constexpr int P = kPitch<D>, KD = D / 16, ND = D / 8, NS = kStream / 8;
  const Lane at;
  const int64_t base = in.base(blockIdx.x), base_o = io.base(blockIdx.x);
  const int q0 = int(gridDim.y - 1 - blockIdx.y) * kBlockRows, qw = q0 + 16 * at.warp;
  auto ks = dynamic_shared<uint16_t>();
  auto vs = ks + kStream * P;
  load_rows<D>(q + base, in.row, t, q0, ks);  // Q's fragments, staged through the key tile
  __syncthreads();
  FragA qa[KD];
  load_warp_rows<D>(qa, ks, 16 * at.warp, at.lane);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // m in log2 units; l: this lane's share
  FragD o[ND];
  const int key_end = q0 + kBlockRows < t ? q0 + kBlockRows : t;
  for (int k0 = 0; k0 < key_end; k0 += kStream) {
    __syncthreads();  // every warp is done with the previous tiles
    load_rows<D>(k + base, in.row, t, k0, ks);
    load_rows<D>(v + base, in.row, t, k0, vs);
    __syncthreads();
    FragD s[NS];
    score_tile<T, D>(s, qa, ks, at.lane);
    float mx[2] = {-INFINITY, -INFINITY};
    TANDEM_MMA_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int row = qw + at.row(i), key = k0 + 8 * n + at.col(i);
        s[n].r[i] = key <= row && row < t ? s[n].r[i] * scale_log2 : -INFINITY;
        mx[i / 2] = fmaxf(mx[i / 2], s[n].r[i]);
      }
    float shift[2], alpha[2];
    TANDEM_MMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(m[h], quad_max(mx[h]));
      shift[h] = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet: all weights 0
      alpha[h] = exp2f(m[h] - shift[h]);
      m[h] = m_new;
      l[h] *= alpha[h];
    }
    TANDEM_MMA_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        s[n].r[i] = exp2f(s[n].r[i] - shift[i / 2]);
        l[i / 2] += s[n].r[i];
      }
    TANDEM_MMA_UNROLL
    for (int n = 0; n < ND; ++n)
      TANDEM_MMA_UNROLL
      for (int i = 0; i < 4; ++i) o[n].r[i] *= alpha[i / 2];
    accumulate_tile<T, D>(o, s, vs, at.lane);
  }
  TANDEM_MMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float sum = quad_sum(l[h]);
    const int row = qw + at.g + 8 * h;
    if (row >= t) continue;
    store_rows_half<T>(out + base_o, io.row, row, o, h, 1.f / sum, at.c);
    if (at.c == 0) lse[int64_t(blockIdx.x) * t + row] = (m[h] + log2f(sum)) / kLog2e;
  }
}

// A warp's rows' lse (in log2 units) and delta = dO . O for rows g and g + 8; the lanes of a quad
// each sum a quarter of the columns. Also stores delta for the dK/dV kernel.
template <class T, int D>
__device__ void row_stats(const T* __restrict__ o, const T* __restrict__ dout, const float* __restrict__ lse,
                          float* __restrict__ delta, int64_t base_o, int64_t ld_o, int64_t head_rows, int qw, int t,
                          const Lane& at, float (&lse2)[2], float (&dl)[2]) {
  TANDEM_MMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = qw + at.g + 8 * h;
    float part = 0.f;
    if (row < t)
      for (int j = at.c * (D / 4); j < (at.c + 1) * (D / 4); ++j)
        part += float(to_acc(o[base_o + row * ld_o + j])) * float(to_acc(dout[base_o + row * ld_o + j]));
    dl[h] = quad_sum(part);
    lse2[h] = row < t ? lse[head_rows + row] * kLog2e : 0.f;
    if (row < t && at.c == 0) delta[head_rows + row] = dl[h];
  }
}

// dQ for query tile blockIdx.y: dS = P (dP - delta) with dP = dO V^T, dQ = scale * dS K.
template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_backward_dq_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                     const uint16_t* __restrict__ v, const T* __restrict__ o,
                                     const float* __restrict__ lse, const T* __restrict__ dout,
                                     uint16_t* __restrict__ dq, float* __restrict__ delta, int t, float scale_log2,
                                     float scale, kernels::HeadRows in, kernels::HeadRows io) {
  constexpr int P = kPitch<D>, KD = D / 16, ND = D / 8, NS = kStream / 8;
  const Lane at;
  const int64_t base = in.base(blockIdx.x), base_o = io.base(blockIdx.x), head_rows = int64_t(blockIdx.x) * t;
  const int q0 = int(gridDim.y - 1 - blockIdx.y) * kBlockRows, qw = q0 + 16 * at.warp;
  auto ks = dynamic_shared<uint16_t>();
  auto vs = ks + kStream * P;
  load_rows<D>(q + base, in.row, t, q0, ks);  // Q's and dO's fragments, staged through the key tiles
  load_rows<D>(reinterpret_cast<const uint16_t*>(dout) + base_o, io.row, t, q0, vs);
  __syncthreads();
  FragA qa[KD], da[KD];
  load_warp_rows<D>(qa, ks, 16 * at.warp, at.lane);
  load_warp_rows<D>(da, vs, 16 * at.warp, at.lane);
  float lse2[2], dl[2];
  row_stats<T, D>(o, dout, lse, delta, base_o, io.row, head_rows, qw, t, at, lse2, dl);
  FragD acc[ND];
  const int key_end = q0 + kBlockRows < t ? q0 + kBlockRows : t;
  for (int k0 = 0; k0 < key_end; k0 += kStream) {
    __syncthreads();
    load_rows<D>(k + base, in.row, t, k0, ks);
    load_rows<D>(v + base, in.row, t, k0, vs);
    __syncthreads();
    FragD s[NS], dp[NS];
    score_tile<T, D>(s, qa, ks, at.lane);
    score_tile<T, D>(dp, da, vs, at.lane);
    TANDEM_MMA_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int row = qw + at.row(i), key = k0 + 8 * n + at.col(i), h = i / 2;
        const float p = key <= row && row < t ? exp2f(s[n].r[i] * scale_log2 - lse2[h]) : 0.f;
        s[n].r[i] = p * (dp[n].r[i] - dl[h]);  // dS, in place of the scores
      }
    accumulate_tile<T, D>(acc, s, ks, at.lane);
  }
  TANDEM_MMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = qw + at.g + 8 * h;
    if (row < t) store_rows_half<T>(dq + base, in.row, row, acc, h, scale, at.c);
  }
}

// dK, dV for key tile blockIdx.y (tile 0, seen by every query, first): the query tiles from its own
// on stream through. dV = P^T dO, dK = scale * dS^T Q, with the transposed scores S^T = K Q^T.
template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_backward_dkv_mma_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                      const uint16_t* __restrict__ v, const float* __restrict__ lse,
                                      const float* __restrict__ delta, const uint16_t* __restrict__ dout,
                                      uint16_t* __restrict__ dk, uint16_t* __restrict__ dv, int t, float scale_log2,
                                      float scale, kernels::HeadRows in, kernels::HeadRows io) {
  constexpr int P = kPitch<D>, KD = D / 16, ND = D / 8, NS = kStream / 8;
  const Lane at;
  // The head's offsets once, here: a 64-bit division in the loop below cost the D = 128 kernel spills.
  const int64_t base = in.base(blockIdx.x), head_rows = int64_t(blockIdx.x) * t, ld = in.row, ld_o = io.row;
  const uint16_t* __restrict__ dout_h = dout + io.base(blockIdx.x);
  const int k0 = int(blockIdx.y) * kBlockRows, kw = k0 + 16 * at.warp;
  auto qs = dynamic_shared<uint16_t>();
  auto dos = qs + kStream * P;
  auto lse2s = shared_as<float>(dos + kStream * P);  // the streamed queries' lse (log2 units), delta
  auto deltas = lse2s + kStream;
  load_rows<D>(k + base, ld, t, k0, qs);  // K's and V's fragments, staged through the query tiles
  load_rows<D>(v + base, ld, t, k0, dos);
  __syncthreads();
  FragA ka[KD], va[KD];
  load_warp_rows<D>(ka, qs, 16 * at.warp, at.lane);
  load_warp_rows<D>(va, dos, 16 * at.warp, at.lane);
  FragD dk_acc[ND], dv_acc[ND];
  for (int i0 = k0; i0 < t; i0 += kStream) {
    __syncthreads();
    load_rows<D>(q + base, ld, t, i0, qs);
    load_rows<D>(dout_h, ld_o, t, i0, dos);
    for (int i = int(threadIdx.x); i < kStream; i += int(blockDim.x)) {
      lse2s[i] = i0 + i < t ? lse[head_rows + i0 + i] * kLog2e : 0.f;
      deltas[i] = i0 + i < t ? delta[head_rows + i0 + i] : 0.f;
    }
    __syncthreads();
    FragD s[NS], dp[NS];
    score_tile<T, D>(s, ka, qs, at.lane);
    score_tile<T, D>(dp, va, dos, at.lane);
    TANDEM_MMA_UNROLL
    for (int n = 0; n < NS; ++n)
      TANDEM_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int key = kw + at.row(i), col = 8 * n + at.col(i), query = i0 + col;
        const bool seen = query >= key && query < t;
        const float p = seen ? exp2f(s[n].r[i] * scale_log2 - float(lse2s[col])) : 0.f;
        s[n].r[i] = p;
        dp[n].r[i] = seen ? p * (dp[n].r[i] - float(deltas[col])) : 0.f;  // dS^T
      }
    accumulate_tile<T, D>(dv_acc, s, dos, at.lane);  // P^T dO
    accumulate_tile<T, D>(dk_acc, dp, qs, at.lane);   // dS^T Q
  }
  TANDEM_MMA_UNROLL
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

size_t stream_bytes(int64_t d) { return size_t(2 * kStream * (d + 8)) * sizeof(uint16_t); }
dim3 grid_of(const kernels::AttentionShape& s) {
  return dim3(static_cast<unsigned>(s.heads()), static_cast<unsigned>((s.t + kBlockRows - 1) / kBlockRows));
}
const uint16_t* bits(const Tensor& x, int64_t offset = 0) { return static_cast<const uint16_t*>(x.data_ptr()) + offset; }
uint16_t* bits(Tensor& x, int64_t offset = 0) { return static_cast<uint16_t*>(x.data_ptr()) + offset; }

}  // namespace

bool attention_mma_fits(const kernels::AttentionShape& s, std::initializer_list<const Tensor*> tensors) {
  if (s.d != 16 && s.d != 32 && s.d != 64 && s.d != 128) return false;
  // Rows as int; heads on grid.x, row tiles on grid.y (at most 65535).
  if (s.t >= (int64_t(1) << 30) || s.heads() > 0x7fffffff || (s.t + kBlockRows - 1) / kBlockRows > 65535) return false;
  for (const Tensor* x : tensors)
    if (!is_low_precision(x->dtype()) || !aligned16(x->data_ptr())) return false;
  // Every row of every operand 16-byte aligned (8 elements): its start and stride.
  for (int64_t e : {s.ld_in, s.ld_out, s.q_off, s.k_off, s.v_off})
    if (e % 8 != 0) return false;
  return true;
}

void attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                           const kernels::AttentionShape& s) {
  const float scale_log2 = static_cast<float>(s.scale) * kLog2e;
  with_16bit(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(s.d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      TANDEM_LAUNCH(attention_forward_mma_kernel<T, D>, grid_of(s), kWarps * 32, stream_bytes(D),
                    stream_for(q.device()), bits(q, s.q_off), bits(k, s.k_off), bits(v, s.v_off), bits(out),
                    static_cast<float*>(lse.data_ptr()), static_cast<int>(s.t), scale_log2,
                    kernels::head_rows(s, s.ld_in), kernels::head_rows(s, s.ld_out));
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
      Tensor delta = Tensor::empty({s.b, s.h, s.t}, DType::f32, q.device());
      const float* lse_p = static_cast<const float*>(lse.data_ptr());
      float* delta_p = static_cast<float*>(delta.data_ptr());
      const kernels::HeadRows in = kernels::head_rows(s, s.ld_in), io = kernels::head_rows(s, s.ld_out);
      TANDEM_LAUNCH(attention_backward_dq_mma_kernel<T, D>, grid_of(s), kWarps * 32, stream_bytes(D), stream,
                    bits(q, s.q_off), bits(k, s.k_off), bits(v, s.v_off), static_cast<const T*>(out.data_ptr()), lse_p,
                    static_cast<const T*>(dout.data_ptr()), bits(dq, s.q_off), delta_p, static_cast<int>(s.t),
                    scale_log2, scale, in, io);
      TANDEM_LAUNCH(attention_backward_dkv_mma_kernel<T, D>, grid_of(s), kWarps * 32,
                    stream_bytes(D) + 2 * kStream * sizeof(float), stream, bits(q, s.q_off), bits(k, s.k_off),
                    bits(v, s.v_off), lse_p, static_cast<const float*>(delta_p), bits(dout), bits(dk, s.k_off),
                    bits(dv, s.v_off), static_cast<int>(s.t), scale_log2, scale, in, io);
    });
  });
}

}  // namespace tandem::TANDEM_CUDA_NS
