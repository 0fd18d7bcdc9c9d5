// Packing and register-tile micro-kernels of the AVX2+FMA GEMM (gemm_avx2.cpp drives them). Every
// function carrying intrinsics is compiled for AVX2+FMA by a target attribute and has internal linkage,
// so nothing here runs on a CPU without them, whatever -march the build uses (x86-64-v3 in CI).
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/widen_avx2.h"

namespace tandem::kernels::avx2 {
namespace {

// Register tile: kMR rows x kNR columns = 6 x 2 ymm accumulators (12 of the 16 registers; two hold
// the B row, one the broadcast A value). 12 chains cover the FMA latency x ports (4 x 2 on Zen 3 and
// Intel since Skylake).
constexpr int kMR = 6, kNR = 16;

// Where a tile's sums go (f32 C): the first K block stores alpha*acc + beta*C, later blocks add alpha*acc.
struct TileOut {
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1, beta = 0;
  bool first = true;
};

// Lanes [0, n) of a ymm mask (n clamped to [0, 8]).
TANDEM_AVX2_INLINE __m256i low_mask8(int n) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

// How a tile's sums meet C, decided once per tile (the stores to C could alias TileOut's fields, so
// reading them row by row made the compiler reload them after every store).
// acc; alpha acc; acc + C; alpha acc + C; alpha acc + beta C
enum class Update { Store, Scale, AddC, ScaleAddC, AxpbyC };

// One row's 8 columns (n of them valid, n >= 1) of a tile. beta == 0 never reads C (NaNs there vanish).
TANDEM_AVX2_INLINE void store_row8(__m256 acc, int n, Update u, __m256 alpha, __m256 beta, float* c) {
  const bool full = n >= 8;
  const __m256i m = low_mask8(n);
  __m256 v = u == Update::Store || u == Update::AddC ? acc : _mm256_mul_ps(alpha, acc);
  if (u == Update::AddC || u == Update::ScaleAddC || u == Update::AxpbyC) {
    const __m256 old = full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, m);
    v = u == Update::AxpbyC ? _mm256_fmadd_ps(beta, old, v) : _mm256_add_ps(v, old);
  }
  if (full)
    _mm256_storeu_ps(c, v);
  else
    _mm256_maskstore_ps(c, m, v);
}

// a: a packed A panel [kc][kMR] (first MR rows used), b: a packed B panel [kc][kNR]; n columns of C
// valid. NARROW: the panel's last 8 columns are all padding (n <= 8), so only the first ymm column is
// computed. Each element sums its kc products in order of p (one FMA chain), as the AVX-512 kernel does.
template <int MR, bool NARROW>
TANDEM_AVX2 void kernel_f32(int64_t kc, const float* a, const float* b, int n, const TileOut& o) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  // Unrolled by 4: the loop's own instructions (pointer steps, compare, branch) would otherwise take
  // front-end slots from the 12 FMAs and 8 loads of each step.
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b + p * kNR), b1 = NARROW ? b0 : _mm256_load_ps(b + p * kNR + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + p * kMR + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      if (!NARROW) c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
  }
  // alpha 1 is exact either way: skipping its product changes no bit.
  const Update u = !o.first ? (o.alpha == 1 ? Update::AddC : Update::ScaleAddC)
                   : o.beta != 0 ? Update::AxpbyC
                   : o.alpha == 1 ? Update::Store : Update::Scale;
  const __m256 alpha = _mm256_set1_ps(o.alpha), beta = _mm256_set1_ps(o.beta);
  float* const c = o.c;
  const int64_t ldc = o.ldc;
  auto rows = [&](Update uu) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      store_row8(c0[i], n, uu, alpha, beta, c + i * ldc);
      if (!NARROW && n > 8) store_row8(c1[i], n - 8, uu, alpha, beta, c + i * ldc + 8);
    }
  };
  switch (u) {  // one copy of the stores per case, so that each is branch-free
    case Update::Store: rows(Update::Store); break;
    case Update::Scale: rows(Update::Scale); break;
    case Update::AddC: rows(Update::AddC); break;
    case Update::ScaleAddC: rows(Update::ScaleAddC); break;
    case Update::AxpbyC: rows(Update::AxpbyC); break;
  }
}

// Lanes [0, n) of p (n <= 8), the rest zero; nothing read past p + n.
TANDEM_AVX2_INLINE __m256 load8_first(const float* p, int n) { return _mm256_maskload_ps(p, low_mask8(n)); }
template <class S>
TANDEM_AVX2_INLINE __m256 load8_first(const S* p, int n) {  // the 16-bit values copied, widened as 8
  alignas(16) S t[8] = {};
  for (int i = 0; i < n && i < 8; ++i) t[i] = p[i];
  return load8(t);
}

// 8 x 8 transpose: r[i] lane j -> r[j] lane i.
TANDEM_AVX2_INLINE void transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// A panel of W rows whose source rows run along K (element (r, p) at x[r * rs + p], r < rows, p < kc):
// out[p * W + r], rows past `rows` zero. Blocks of 8 rows x 8 K indices go through transpose8.
template <int W, class S>
TANDEM_AVX2 void pack_panel_k_contiguous(const S* x, int64_t rs, int rows, int64_t kc, float* out) {
  const int64_t kc8 = kc / 8 * 8;
  for (int r0 = 0; r0 < W; r0 += 8) {
    const int lanes = W - r0 < 8 ? W - r0 : 8;  // output lanes of this row group
    const __m256i store_mask = low_mask8(lanes);
    for (int64_t p0 = 0; p0 < kc8; p0 += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i)
        v[i] = r0 + i < rows ? load8(x + (r0 + i) * rs + p0) : _mm256_setzero_ps();
      transpose8(v);
      // A panel narrower than 8 (W = 6) stores all 8 lanes at each K index but the block's last: the
      // extra lanes land on the next K index's first lanes, which its own store then overwrites. Only
      // the block's last store is masked (a masked store costs several cycles on Zen 3; on Intel the
      // eight of each 8 x 8 block were 15% of this function), and nothing is written past the panel,
      // whose neighbour another thread may be packing.
      for (int q = 0; q < 8; ++q) {
        float* o = out + (p0 + q) * W + r0;
        if (lanes == 8 || (lanes == W && q < 7))
          _mm256_storeu_ps(o, v[q]);
        else
          _mm256_maskstore_ps(o, store_mask, v[q]);
      }
    }
  }
  for (int64_t p = kc8; p < kc; ++p)
    for (int r = 0; r < W; ++r) out[p * W + r] = r < rows ? widen1(x[r * rs + p]) : 0.f;
}

// A panel whose source rows are contiguous along the panel (element (r, p) at x[p * ps + r]): each K
// index is one copy of `rows` floats, zero-padded to W. readable: how many elements from x on each
// source row may be read (x's row continues past the panel); 0 when unknown.
template <int W, class S>
TANDEM_AVX2 void pack_panel_rows_contiguous(const S* x, int64_t ps, int rows, int64_t kc, float* out,
                                            int64_t readable = 0) {
  // A narrow panel (W = 6, A's) copies 8 lanes a K index: a full panel whose source row goes on for 8
  // elements loads them as they are; the 8 - W extra lanes land on the next K index's first lanes,
  // which its own copy then overwrites, and only the last index's store is masked (the next one may
  // be another thread's, or the next panel's). Value by value, these copies were 1.5% of the GPT's
  // step on the AVX2 path (the weight gradients' A = dY^T).
  const bool whole = rows == W && readable >= 8;
  for (int64_t p = 0; p < kc; ++p) {
    const S* s = x + p * ps;
    float* o = out + p * W;
    if constexpr (W == 16) {
      if (rows >= 16) {
        _mm256_store_ps(o, load8(s));
        _mm256_store_ps(o + 8, load8(s + 8));
      } else {
        _mm256_store_ps(o, load8_first(s, rows < 8 ? rows : 8));
        _mm256_store_ps(o + 8, rows > 8 ? load8_first(s + 8, rows - 8) : _mm256_setzero_ps());
      }
    } else if constexpr (W < 8) {
      const __m256 v = whole ? load8(s) : load8_first(s, rows);
      if (p + 1 < kc)
        _mm256_storeu_ps(o, v);
      else
        _mm256_maskstore_ps(o, low_mask8(W), v);
    } else {
      for (int r = 0; r < W; ++r) o[r] = r < rows ? widen1(s[r]) : 0.f;
    }
  }
}

// All np panels of a block whose source rows are contiguous along the panels (B as stored: element
// (r, p) at src[p * ps + r], panel q holding r in [q * h, q * h + h)), K indices [p0, p1) of each, in
// runs of kPackRun indices, runs outermost: each source row is then read once, left to right across
// all panels, while the run's few rows are in L1 (panel by panel, every row of a panel is a new page
// for a wide B, which the prefetchers do not follow: [6 x 1024] x [1024 x 288]... see gemm_avx2.cpp).
constexpr int64_t kPackRun = 8;
template <int W, class S>
TANDEM_AVX2 void pack_rows_runs(const S* src, int64_t ps, int64_t rows, int64_t h, int64_t np, int64_t p0,
                                int64_t p1, float* out, int64_t pstride) {
  for (int64_t run = p0; run < p1; run += kPackRun) {
    const int64_t run_end = run + kPackRun < p1 ? run + kPackRun : p1;
    for (int64_t q = 0; q < np; ++q) {
      const int r = static_cast<int>(rows - q * h < h ? rows - q * h : h);
      pack_panel_rows_contiguous<W>(src + run * ps + q * h, ps, r, run_end - run, out + q * pstride + run * W,
                                    rows - q * h);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::avx2
