// CUDA causal attention, flash-attention's scheme on SIMT cores (f32 accumulation for every dtype):
// no [T, T] matrix exists. A block holds a tile of rows (queries; keys for dK/dV) in shared memory,
// kRows per warp, and streams tiles of 32 of the other side through it: lane j scores against item j
// of the tile, the warp reduces max and sum with our reduce primitives, and each lane accumulates
// D/32 output columns. Backward: one kernel for dQ (and the per-row delta = dO . O), one for dK, dV
// per key tile; no atomics, so the result does not depend on the schedule.
//
// A warp's kRows rows are scored together, each element of the lane's streamed item read once for
// all of them (the rows' elements are broadcasts), and each streamed row's D/32 elements are read
// once for all kRows accumulations. Every accumulator still adds its terms in the same order as a
// row at a time would. Warp shuffles stay out of branches that depend on the warp (the causal
// cut-offs): the compiler cannot tell that such a branch is uniform and turned each shuffle in one
// into a subroutine call behind a WARPSYNC. The branches guard the additions alone, so a masked
// (future) item adds nothing, not even 0 * inf.
//
// bf16 and f16 inputs of head dimension 16, 32, 64 or 128 take the tensor-core kernels of
// attention_mma_*.cu instead; the rest (f32, f64, other head dimensions) stay here.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce.cuh"
#include "runtime/backend/attention.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

// Loops over a warp's rows and a lane's columns are unrolled (TANDEM_UNROLL) so that the per-row
// arrays (acc[kRows][DC], m, l) live in registers rather than in local memory (ptxas -v: stack
// frames of 64-192 bytes without it); loops over the head dimension by 4 on the GPU, for immediate
// offsets.
#if defined(__CUDACC__)
#define TANDEM_ATTN_UNROLL_4 _Pragma("unroll 4")
#else
#define TANDEM_ATTN_UNROLL_4
#endif

constexpr int kRows = 8;                    // rows of the block's own tile per warp
constexpr int kTile = 32;                   // items of the streamed tile: one per lane
constexpr size_t kSharedBudget = 48 * 1024; // per block: the most that needs no opt-in
constexpr int64_t kMaxHeadDim = 128;        // DC = head_dim / 32 columns per lane, at most 4

// Shared tiles are row-major with a pitch of d + 1: lane j reading row j (a dot product) and the
// lanes reading one row's consecutive columns (the accumulation) both hit 32 different banks.
struct Plan {
  int warps = 0;
  size_t shared = 0;
  int64_t rows() const { return int64_t(warps) * kRows; }
};
Plan make_plan(int64_t d, size_t elem, int row_tiles, int stream_tiles, int extra) {
  for (int warps : {8, 4, 2, 1}) {
    const size_t n = size_t((row_tiles * warps * kRows + stream_tiles * kTile) * (d + 1) + extra);
    if (n * elem <= kSharedBudget) return Plan{warps, n * elem};
  }
  TANDEM_FAIL(NotSupported, "causal_attention: head dimension {} does not fit in shared memory in {}-byte elements", d,
              elem);
}

// rows [r0, r0 + n) of x (t rows of d elements, ld apart) into tile [n, d + 1] as X, zero past t, in
// steps of W elements
// (one load of W * sizeof(T) bytes). A thread's (row, step) advances by blockDim.x steps without a
// division in the loop: a 64-bit division per element cost about as many instructions as the
// scores and sums of the tile themselves. (reduce.cuh's RowCursor does the same in 64 bits; here
// 32-bit counters keep dQ's kernel at 128 registers, where RowCursor took it to 164.)
template <int W, class T, class X, class S>
__device__ void load_tile_by(const T* __restrict__ x, int64_t ld, int64_t t, int64_t d, int64_t r0, int64_t n,
                             S tile) {
  const int steps = int(d) / W, ni = int(n), tid = int(threadIdx.x), stride = int(blockDim.x);
  const int stride_r = stride / steps, stride_c = stride % steps;
  const int64_t pitch = d + 1;
  for (int r = tid / steps, c = tid % steps; r < ni;) {
    Pack<T, W> p;
    if (r0 + r < t) p = reinterpret_cast<const Pack<T, W>*>(x + (r0 + r) * ld)[c];
    for (int k = 0; k < W; ++k) tile[r * pitch + c * W + k] = r0 + r < t ? X(to_acc(p.v[k])) : X(0);
    r += stride_r;
    c += stride_c;
    if (c >= steps) {
      c -= steps;
      ++r;
    }
  }
}

// Four elements a load where the rows allow it (d and ld multiples of 4, x aligned to four elements):
// a quarter of the load instructions the tiles took one element at a time.
template <class T, class X, class S>
__device__ void load_tile(const T* __restrict__ x, int64_t ld, int64_t t, int64_t d, int64_t r0, int64_t n, S tile) {
  constexpr int kVec = 4;
  if (d % kVec == 0 && ld % kVec == 0 && reinterpret_cast<uintptr_t>(x) % (kVec * sizeof(T)) == 0)
    load_tile_by<kVec, T, X>(x, ld, t, d, r0, n, tile);
  else
    load_tile_by<1, T, X>(x, ld, t, d, r0, n, tile);
}

// out[r] = rows[r] . item for the kRows consecutive rows of a tile (pitch apart), each summed over
// the columns in order; every element of `item` is read once.
template <class X, class S>
__device__ __forceinline__ void dot_rows(S rows, int64_t pitch, S item, int64_t d, X (&out)[kRows]) {
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) out[r] = X(0);
  TANDEM_ATTN_UNROLL_4
  for (int64_t c = 0; c < d; ++c) {
    const X b = X(item[c]);
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) out[r] += X(rows[r * pitch + c]) * b;
  }
}

// A lane's D/32 columns of a shared tile's row (zero past d).
template <int DC, class X, class S>
__device__ __forceinline__ void load_row(X (&dst)[DC], S tile_row, int lane, int64_t d) {
  TANDEM_UNROLL
  for (int c = 0; c < DC; ++c) dst[c] = lane + 32 * c < d ? X(tile_row[lane + 32 * c]) : X(0);
}

// This block's place: head blockIdx.x, its own tile of `rows` rows (kRows per warp) from r0, where
// the head's rows start in the q/k/v-side operands (base) and in out/dout (base_o); a thread's lane
// and warp. Query tiles are numbered from the last (`last_first`): the later a query,
// the more keys it sees, so the longest blocks start first and the short ones fill the tail.
struct Place {
  int64_t pitch, rows, r0, head, base, base_o;
  int lane, warp;
  __device__ Place(int64_t d, bool last_first, const kernels::HeadRows& in, const kernels::HeadRows& io)
      : pitch(d + 1), rows(int64_t(blockDim.x / 32) * kRows),
        r0(int64_t(last_first ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * rows), head(blockIdx.x),
        base(in.base(head)), base_o(io.base(head)), lane(int(threadIdx.x % 32)), warp(int(threadIdx.x / 32)) {}
  __device__ int64_t row(int r) const { return int64_t(warp) * kRows + r; }  // within the block's tile
};

// The keys a query tile [q0, q0 + rows) sees end at its last query (or at t).
__device__ __forceinline__ int64_t key_end(int64_t q0, int64_t rows, int64_t t) { return q0 + rows < t ? q0 + rows : t; }

// How many keys of the tile [k0, k0 + kTile) query qi sees (0 for a query past t).
__device__ __forceinline__ int keys_seen(int64_t qi, int64_t k0, int64_t t) {
  if (qi >= t || k0 > qi) return 0;
  return qi - k0 + 1 < kTile ? int(qi - k0 + 1) : kTile;
}

// seen[r] = keys_seen for the warp's rows q0 + r.
__device__ __forceinline__ void rows_seeing(int64_t q0, int64_t k0, int64_t t, int (&seen)[kRows]) {
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) seen[r] = keys_seen(q0 + r, k0, t);
}

// Keys and values [k0, k0 + kTile) into their tiles, once every warp is done with the previous ones
// (the first call also orders the block's own tiles, stored before it, before any read).
template <class T, class X, class S>
__device__ void next_key_tiles(const T* k, const T* v, int64_t ld, int64_t t, int64_t d, int64_t k0, S ks, S vs) {
  __syncthreads();
  load_tile<T, X>(k, ld, t, d, k0, kTile, ks);
  load_tile<T, X>(v, ld, t, d, k0, kTile, vs);
  __syncthreads();
}

// acc[c] += w * row[c] over a lane's D/32 columns.
template <int DC, class X>
__device__ __forceinline__ void axpy_row(X (&acc)[DC], X w, const X (&row)[DC]) {
  TANDEM_UNROLL
  for (int c = 0; c < DC; ++c) acc[c] += w * row[c];
}

// acc[r] += w_j[r] * tile row j over the tile's items j that row r sees (j < seen[r]), the weight
// w_j[r] being lane j's weights[r]. The shuffles come before the warp-dependent test.
template <int DC, class X, class S>
__device__ __forceinline__ void add_seen_items(X (&acc)[kRows][DC], const X (&weights)[kRows], S tile, int64_t pitch,
                                               const int (&seen)[kRows], int lane, int64_t d) {
  for (int j = 0; j < kTile; ++j) {
    X row[DC];
    load_row(row, tile + j * pitch, lane, d);
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const X w = __shfl_sync(kFullMask, weights[r], j);
      if (j < seen[r]) axpy_row(acc[r], w, row);
    }
  }
}

// dst[lane + 32 c] = acc[c] * mul, rounded to T.
template <class T, int DC, class X>
__device__ __forceinline__ void store_row(T* dst, const X (&acc)[DC], X mul, int lane, int64_t d) {
  TANDEM_UNROLL
  for (int c = 0; c < DC; ++c)
    if (lane + 32 * c < d) dst[lane + 32 * c] = from_acc<T>(acc[c] * mul);
}

// out, lse for the query tile blockIdx.y of head blockIdx.x.
template <class T, int DC>
__global__ void attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                         T* __restrict__ out, acc_t<T>* __restrict__ lse, int64_t t, int64_t d,
                                         acc_t<T> scale, kernels::HeadRows in, kernels::HeadRows io) {
  using X = acc_t<T>;
  const Place at(d, true, in, io);
  const int64_t pitch = at.pitch, bq = at.rows, q0 = at.r0, base = at.base;
  const int lane = at.lane;
  auto qs = dynamic_shared<X>();
  auto ks = qs + bq * pitch;
  auto vs = ks + kTile * pitch;
  load_tile<T, X>(q + base, in.row, t, d, q0, bq, qs);
  X m[kRows], l[kRows], acc[kRows][DC];
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = X(0);
    TANDEM_UNROLL
    for (int c = 0; c < DC; ++c) acc[r][c] = X(0);
  }
  for (int64_t k0 = 0; k0 < key_end(q0, bq, t); k0 += kTile) {
    next_key_tiles<T, X>(k + base, v + base, in.row, t, d, k0, ks, vs);
    int seen[kRows];  // keys of this tile that row r sees: the same for the whole warp
    rows_seeing(q0 + at.row(0), k0, t, seen);
    X s[kRows], p[kRows];
    dot_rows(qs + at.row(0) * pitch, pitch, ks + lane * pitch, d, s);
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const X sr = lane < seen[r] ? s[r] * scale : X(-INFINITY);
      const X mx = warp_reduce(sr, MaxOp{});
      const X m_new = seen[r] > 0 ? std::fmax(m[r], mx) : m[r];  // finite when key k0 is seen
      p[r] = lane < seen[r] ? std::exp(sr - m_new) : X(0);
      const X alpha = seen[r] > 0 ? std::exp(m[r] - m_new) : X(1);
      l[r] = l[r] * alpha + warp_reduce(p[r], SumOp{});
      TANDEM_UNROLL
      for (int c = 0; c < DC; ++c) acc[r][c] *= alpha;
      m[r] = m_new;
    }
    add_seen_items(acc, p, vs, pitch, seen, lane, d);
  }
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int64_t qi = q0 + at.row(r);
    if (qi >= t) continue;
    store_row(out + at.base_o + qi * io.row, acc[r], X(1) / l[r], lane, d);
    if (lane == 0) lse[at.head * t + qi] = m[r] + std::log(l[r]);
  }
}

// dQ for the query tile blockIdx.y, and delta = dO . O per row (stored for the dK/dV kernel).
// dS_ij = P_ij (dP_ij - delta_i) with dP = dO V^T; dQ = scale * dS K.
template <class T, int DC>
__global__ void attention_backward_dq_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                             const T* __restrict__ v, const T* __restrict__ o,
                                             const acc_t<T>* __restrict__ lse, const T* __restrict__ dout,
                                             T* __restrict__ dq, acc_t<T>* __restrict__ delta, int64_t t, int64_t d,
                                             acc_t<T> scale, kernels::HeadRows in, kernels::HeadRows io) {
  using X = acc_t<T>;
  const Place at(d, true, in, io);
  const int64_t pitch = at.pitch, bq = at.rows, q0 = at.r0, head = at.head, base = at.base;
  const int lane = at.lane;
  auto qs = dynamic_shared<X>();
  auto dos = qs + bq * pitch;
  auto ks = dos + bq * pitch;
  auto vs = ks + kTile * pitch;
  load_tile<T, X>(q + base, in.row, t, d, q0, bq, qs);
  load_tile<T, X>(dout + at.base_o, io.row, t, d, q0, bq, dos);
  X lse_r[kRows], delta_r[kRows], acc[kRows][DC];
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int64_t qi = q0 + at.row(r);
    X part = X(0);
    if (qi < t)
      for (int64_t c = lane; c < d; c += 32) {
        const int64_t e = at.base_o + qi * io.row + c;
        part += X(to_acc(dout[e])) * X(to_acc(o[e]));
      }
    delta_r[r] = warp_reduce(part, SumOp{});
    lse_r[r] = qi < t ? lse[head * t + qi] : X(0);
    if (qi < t && lane == 0) delta[head * t + qi] = delta_r[r];
    TANDEM_UNROLL
    for (int c = 0; c < DC; ++c) acc[r][c] = X(0);
  }
  for (int64_t k0 = 0; k0 < key_end(q0, bq, t); k0 += kTile) {
    next_key_tiles<T, X>(k + base, v + base, in.row, t, d, k0, ks, vs);
    int seen[kRows];
    rows_seeing(q0 + at.row(0), k0, t, seen);
    X qk[kRows], dp[kRows], ds[kRows];
    dot_rows(qs + at.row(0) * pitch, pitch, ks + lane * pitch, d, qk);
    dot_rows(dos + at.row(0) * pitch, pitch, vs + lane * pitch, d, dp);
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) {
      ds[r] = lane < seen[r] ? std::exp(qk[r] * scale - lse_r[r]) * (dp[r] - delta_r[r]) : X(0);
    }
    add_seen_items(acc, ds, ks, pitch, seen, lane, d);
  }
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int64_t qi = q0 + at.row(r);
    if (qi < t) store_row(dq + base + qi * in.row, acc[r], scale, lane, d);
  }
}

// dK, dV for the key tile blockIdx.y: the query tiles that see it stream through, lane i taking query i.
// dV = P^T dO, dK = scale * dS^T Q.
template <class T, int DC>
__global__ void attention_backward_dkv_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                              const T* __restrict__ v, const acc_t<T>* __restrict__ lse,
                                              const acc_t<T>* __restrict__ delta, const T* __restrict__ dout,
                                              T* __restrict__ dk, T* __restrict__ dv, int64_t t, int64_t d,
                                              acc_t<T> scale, kernels::HeadRows in, kernels::HeadRows io) {
  using X = acc_t<T>;
  const Place at(d, false, in, io);  // key tile 0 is seen by every query: the longest first
  const int64_t pitch = at.pitch, bk = at.rows, k0 = at.r0, head = at.head, base = at.base;
  const int lane = at.lane;
  auto ks = dynamic_shared<X>();
  auto vs = ks + bk * pitch;
  auto qs = vs + bk * pitch;
  auto dos = qs + kTile * pitch;
  auto ls = dos + kTile * pitch;  // lse of the query tile, then delta
  auto ds_ = ls + kTile;
  load_tile<T, X>(k + base, in.row, t, d, k0, bk, ks);
  load_tile<T, X>(v + base, in.row, t, d, k0, bk, vs);
  X acc_k[kRows][DC], acc_v[kRows][DC];
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r)
    TANDEM_UNROLL
    for (int c = 0; c < DC; ++c) acc_k[r][c] = acc_v[r][c] = X(0);
  for (int64_t i0 = k0 / kTile * kTile; i0 < t; i0 += kTile) {
    __syncthreads();
    load_tile<T, X>(q + base, in.row, t, d, i0, kTile, qs);
    load_tile<T, X>(dout + at.base_o, io.row, t, d, i0, kTile, dos);
    if (threadIdx.x < kTile) {
      const int64_t i = i0 + threadIdx.x;
      ls[threadIdx.x] = i < t ? lse[head * t + i] : X(0);
      ds_[threadIdx.x] = i < t ? delta[head * t + i] : X(0);
    }
    __syncthreads();
    // Key row r is seen by the tile's queries [first[r], end); none when first[r] >= end.
    const int end = t - i0 < kTile ? int(t - i0) : kTile;
    int first[kRows];
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int64_t kj = k0 + at.row(r);
      first[r] = kj >= t ? end : kj > i0 ? int(kj - i0 < kTile ? kj - i0 : kTile) : 0;
    }
    X qk[kRows], dp[kRows], p[kRows], ds[kRows];
    dot_rows(ks + at.row(0) * pitch, pitch, qs + lane * pitch, d, qk);
    dot_rows(vs + at.row(0) * pitch, pitch, dos + lane * pitch, d, dp);
    TANDEM_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const bool seen = lane >= first[r] && lane < end;
      p[r] = seen ? std::exp(qk[r] * scale - X(ls[lane])) : X(0);
      ds[r] = seen ? p[r] * (dp[r] - X(ds_[lane])) : X(0);
    }
    for (int j = 0; j < kTile; ++j) {
      X doj[DC], qj[DC];
      load_row(doj, dos + j * pitch, lane, d);
      load_row(qj, qs + j * pitch, lane, d);
      TANDEM_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const X wp = __shfl_sync(kFullMask, p[r], j), wd = __shfl_sync(kFullMask, ds[r], j);
        if (j >= first[r] && j < end) {
          axpy_row(acc_v[r], wp, doj);
          axpy_row(acc_k[r], wd, qj);
        }
      }
    }
  }
  TANDEM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int64_t kj = k0 + at.row(r);
    if (kj >= t) continue;
    store_row(dk + base + kj * in.row, acc_k[r], scale, lane, d);
    store_row(dv + base + kj * in.row, acc_v[r], X(1), lane, d);
  }
}

// f(std::integral_constant<int, DC>) with DC = ceil(d / 32).
template <class F>
void with_columns(int64_t d, F&& f) {
  TANDEM_CHECK_KIND(NotSupported, d >= 1 && d <= kMaxHeadDim,
                     "causal_attention on CUDA supports head dimensions 1..{}, got {}", kMaxHeadDim, d);
  switch ((d + 31) / 32) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    default: return f(std::integral_constant<int, 4>{});
  }
}

unsigned tiles_of(int64_t t, int64_t rows) { return static_cast<unsigned>((t + rows - 1) / rows); }

template <class T>
const T* cptr(const Tensor& x, int64_t offset = 0) { return static_cast<const T*>(x.data_ptr()) + offset; }
template <class T>
T* mptr(Tensor& x, int64_t offset = 0) { return static_cast<T*>(x.data_ptr()) + offset; }

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse,
                       const kernels::AttentionShape& s) {
  check_on_device("causal_attention", q.device(), {&q, &k, &v, &out, &lse});
  if (s.heads() == 0 || s.t == 0) return;
  if (attention_mma_fits(s, {&q, &k, &v, &out})) return attention_forward_mma(q, k, v, out, lse, s);
  dispatch_floating(q.dtype(), "causal_attention", [&](auto tag) {
    using T = decltype(tag);
    using X = acc_t<T>;
    if constexpr (std::is_floating_point_v<X>) with_columns(s.d, [&](auto dc) {
      const Plan p = make_plan(s.d, sizeof(X), 1, 2, 0);
      TANDEM_LAUNCH(attention_forward_kernel<T, decltype(dc)::value>,
                    dim3(static_cast<unsigned>(s.heads()), tiles_of(s.t, p.rows())), p.warps * 32, p.shared,
                    stream_for(q.device()), cptr<T>(q, s.q_off), cptr<T>(k, s.k_off), cptr<T>(v, s.v_off), mptr<T>(out),
                    mptr<X>(lse), s.t, s.d, static_cast<X>(s.scale), kernels::head_rows(s, s.ld_in),
                    kernels::head_rows(s, s.ld_out));
    });
  });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv, const kernels::AttentionShape& s) {
  check_on_device("causal_attention backward", q.device(), {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv});
  if (s.heads() == 0 || s.t == 0) return;
  if (attention_mma_fits(s, {&q, &k, &v, &out, &dout, &dq, &dk, &dv}))
    return attention_backward_mma(q, k, v, out, lse, dout, dq, dk, dv, s);
  dispatch_floating(q.dtype(), "causal_attention backward", [&](auto tag) {
    using T = decltype(tag);
    using X = acc_t<T>;
    if constexpr (std::is_floating_point_v<X>) with_columns(s.d, [&](auto dc) {
      constexpr int DC = decltype(dc)::value;
      Stream stream = stream_for(q.device());
      Tensor delta = Tensor::empty({s.b, s.h, s.t}, dtype_v<X>, q.device());
      const kernels::HeadRows in = kernels::head_rows(s, s.ld_in), io = kernels::head_rows(s, s.ld_out);
      const Plan pq = make_plan(s.d, sizeof(X), 2, 2, 0);
      TANDEM_LAUNCH(attention_backward_dq_kernel<T, DC>, dim3(static_cast<unsigned>(s.heads()), tiles_of(s.t, pq.rows())),
                    pq.warps * 32, pq.shared, stream, cptr<T>(q, s.q_off), cptr<T>(k, s.k_off), cptr<T>(v, s.v_off),
                    cptr<T>(out), cptr<X>(lse), cptr<T>(dout), mptr<T>(dq, s.q_off), mptr<X>(delta), s.t, s.d,
                    static_cast<X>(s.scale), in, io);
      const Plan pk = make_plan(s.d, sizeof(X), 2, 2, 2 * kTile);
      TANDEM_LAUNCH(attention_backward_dkv_kernel<T, DC>, dim3(static_cast<unsigned>(s.heads()), tiles_of(s.t, pk.rows())),
                    pk.warps * 32, pk.shared, stream, cptr<T>(q, s.q_off), cptr<T>(k, s.k_off), cptr<T>(v, s.v_off),
                    cptr<X>(lse), cptr<X>(delta), cptr<T>(dout), mptr<T>(dk, s.k_off), mptr<T>(dv, s.v_off), s.t, s.d,
                    static_cast<X>(s.scale), in, io);
    });
  });
}

TANDEM_REGISTER_KERNEL(kernels::attention_forward, kKind, attention_forward);
TANDEM_REGISTER_KERNEL(kernels::attention_backward, kKind, attention_backward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
