// CPU convolution: im2col + the backend GEMM over chunks of images sized so that the column matrix stays in
// cache (forward: one strided-batched GEMM per chunk writing y directly); backward is the GEMM with the
// columns (dW, one GEMM per image accumulated) and GEMM + col2im (dX). f16/bf16 are computed in f32 and
// rounded once: the activations (x, y, dy, dx) chunk by chunk, widened into and rounded from
// cache-resident scratch (whole-tensor f32 copies cost the cnn under --amp a tenth of its step in
// memory traffic), the weights and biases as whole copies; or, where the CPU GEMM reads 16-bit
// operands as they lie (the 16-bit path, `Direct` below), x, dy, the weights and the columns stay
// in 16 bits and only the GEMM's f32 results are rounded.
#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/lanes.h"
#include "runtime/backend/conv.h"
#include "runtime/backend/gemm.h"

namespace tandem::kernels {
namespace {

// Images per chunk: the column matrix of a chunk, and the chunk's output that the GEMM accumulates
// into, should stay in the L2 cache (~1-2 MB), so that the GEMM reads what im2col (and the bias fill)
// just wrote instead of streaming tens of MB through memory.
int64_t chunk_images(const Conv2dGeometry& g) {
  // 2^17 elements (512 KB in f32) each: measured 25% faster end to end on the cnn than one chunk
  // per batch; 2^16..2^18 perform alike. The output bound matters for few input channels (the cnn's
  // first conv: 9-row columns but 32-channel outputs).
  constexpr int64_t target = int64_t(1) << 17;
  const int64_t per_image = std::max<int64_t>(1, std::max(g.k(), g.o) * g.l());
  return std::clamp<int64_t>(target / per_image, 1, std::max<int64_t>(g.n, 1));
}

// Output columns ox whose input column ox*sw - pw + j lies inside [0, w): [lo, hi).
inline void valid_range(int64_t j, int64_t stride, int64_t pad, int64_t in, int64_t out, int64_t& lo,
                        int64_t& hi) {
  const int64_t first = pad - j;  // ox * stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t last = in - 1 + pad - j;  // ox * stride <= last
  hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  lo = std::min(lo, hi);
}

// "Same" convolutions (stride 1, output size = input size, as the cnn's 3x3 pad 1): the cols row of
// tap (i, j) is the input plane shifted by (i - ph) * w + (j - pw), with the columns that wrap around
// a row edge masked to zero. One long loop per (row, image) instead of one short loop per output row.
bool is_same_conv(const Conv2dGeometry& g) { return g.sh == 1 && g.sw == 1 && g.ho == g.h && g.wo == g.w; }

// Output columns [lo, hi) of kernel column j whose input column ox + j - pw is inside the image; the
// rest wrapped around a row edge in the shifted copy and must be zero.
inline void same_conv_columns(const Conv2dGeometry& g, int64_t j, int64_t& lo, int64_t& hi) {
  lo = std::clamp<int64_t>(g.pw - j, 0, g.wo);
  hi = std::clamp<int64_t>(g.w + g.pw - j, lo, g.wo);
}

// The output pixels [q0, q1) of tap (i, j) whose input pixel q + shift lies inside the image (up to
// the column mask), and the shift.
inline void same_conv_span(const Conv2dGeometry& g, int64_t i, int64_t j, int64_t& q0, int64_t& q1,
                           int64_t& shift) {
  const int64_t oy0 = std::max<int64_t>(0, g.ph - i), oy1 = std::min<int64_t>(g.h, g.h + g.ph - i);
  shift = (i - g.ph) * g.w + (j - g.pw);
  // Also keep q + shift inside the plane: at the first/last valid row a column shift would reach one
  // element into the neighbouring plane (masked, but a read-modify-write there races with the thread
  // that owns that plane).
  q0 = std::max(oy0 * g.w, -shift);
  q1 = std::max(q0, std::min(oy1 * g.w, g.h * g.w - shift));
}

// Per output pixel q of kernel column j: 1 when its input column q % wo + j - pw lies inside the row
// (else the shifted plane wrapped around a row edge there and the value must be 0), kw rows of L.
std::vector<uint8_t> column_masks(const Conv2dGeometry& g);

// One shifted, masked copy per (tap, image): a single select loop the compiler vectorises (the load
// is unconditional and stays inside the plane: [q0, q1) is clipped to it), rather than a short
// memmove plus a scalar fix-up per row edge, which cost several times the stores themselves.
template <class T>
void im2col_same(const Conv2dGeometry& g, const T* x, T* cols) {
  const int64_t K = g.k(), L = g.l(), NL = g.n * L, khw = g.kh * g.kw;
  const std::vector<uint8_t> masks = column_masks(g);
#pragma omp parallel for schedule(static) if (K * NL >= kParallelMinWork)
  for (int64_t r = 0; r < K; ++r) {
    const int64_t ci = r / khw, i = (r / g.kw) % g.kh, j = r % g.kw;
    int64_t q0, q1, shift;
    same_conv_span(g, i, j, q0, q1, shift);
    const uint8_t* __restrict m = masks.data() + j * L;
    for (int64_t img = 0; img < g.n; ++img) {
      const T* __restrict src = x + (img * g.c + ci) * L + shift;  // src[q] for q in [q0, q1) is in the plane
      T* __restrict out = cols + r * NL + img * L;
      for (int64_t q = 0; q < q0; ++q) out[q] = T(0);
      for (int64_t q = q0; q < q1; ++q) {
        const T v = src[q];
        out[q] = m[q] ? v : T(0);
      }
      for (int64_t q = q1; q < L; ++q) out[q] = T(0);
    }
  }
}

// col2im uses the same masks (cols is read-only, and a select in the add loop measured faster than
// zeroing a scratch copy of each row).
std::vector<uint8_t> column_masks(const Conv2dGeometry& g) {
  const int64_t L = g.l();
  std::vector<uint8_t> m(static_cast<size_t>(g.kw * L));
  for (int64_t j = 0; j < g.kw; ++j) {
    int64_t lo, hi;
    same_conv_columns(g, j, lo, hi);
    uint8_t* row = m.data() + j * L;  // one output row's pattern, then copies of it (no q % wo per pixel)
    for (int64_t ox = 0; ox < g.wo && ox < L; ++ox) row[ox] = ox >= lo && ox < hi;
    for (int64_t q = g.wo; q < L; q += g.wo) std::copy_n(row, std::min(g.wo, L - q), row + q);
  }
  return m;
}

template <class T>
void col2im_same(const Conv2dGeometry& g, const T* cols, T* x) {
  const int64_t L = g.l(), NL = g.n * L;
  const std::vector<uint8_t> masks = column_masks(g);
#pragma omp parallel for schedule(static) if (NL * g.c * g.kh * g.kw >= kParallelMinWork)
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    const int64_t img = p / g.c, ci = p % g.c;
    T* __restrict plane = x + p * L;
    for (int64_t q = 0; q < L; ++q) plane[q] = T(0);
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t q0, q1, shift;
        same_conv_span(g, i, j, q0, q1, shift);
        const uint8_t* __restrict m = masks.data() + j * L;
        const T* __restrict src = cols + ((ci * g.kh + i) * g.kw + j) * NL + img * L;
        T* __restrict dst = plane + shift;  // dst[q] for q in [q0, q1) lies inside the plane
        for (int64_t q = q0; q < q1; ++q) dst[q] += m[q] ? src[q] : T(0);
      }
  }
}

template <class T>
void im2col_t(const Conv2dGeometry& g, const T* x, T* cols) {
  if (is_same_conv(g)) return im2col_same(g, x, cols);
  const int64_t K = g.k(), L = g.l(), NL = g.n * L, khw = g.kh * g.kw;
#pragma omp parallel for schedule(static) if (K * NL >= kParallelMinWork)
  for (int64_t r = 0; r < K; ++r) {
    const int64_t ci = r / khw, i = (r / g.kw) % g.kh, j = r % g.kw;
    int64_t lo, hi;
    valid_range(j, g.sw, g.pw, g.w, g.wo, lo, hi);
    for (int64_t img = 0; img < g.n; ++img) {
      const T* plane = x + (img * g.c + ci) * g.h * g.w;
      T* out = cols + r * NL + img * L;
      for (int64_t oy = 0; oy < g.ho; ++oy) {
        T* o = out + oy * g.wo;
        const int64_t iy = oy * g.sh - g.ph + i;
        if (iy < 0 || iy >= g.h) {
          for (int64_t ox = 0; ox < g.wo; ++ox) o[ox] = T(0);
          continue;
        }
        const T* src = plane + iy * g.w - g.pw + j;  // src[ox * sw] for ox in [lo, hi)
        // Plain loops rather than std::fill: the rows are short and memset calls would dominate.
        for (int64_t ox = 0; ox < lo; ++ox) o[ox] = T(0);
        if (g.sw == 1) {
          for (int64_t ox = lo; ox < hi; ++ox) o[ox] = src[ox];
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) o[ox] = src[ox * g.sw];
        }
        for (int64_t ox = hi; ox < g.wo; ++ox) o[ox] = T(0);
      }
    }
  }
}

// One (image, channel) plane per iteration; within a plane the additions run in a fixed order, so
// the result does not depend on the thread count.
template <class T>
void col2im_t(const Conv2dGeometry& g, const T* cols, T* x) {
  if (is_same_conv(g)) return col2im_same(g, cols, x);
  const int64_t L = g.l(), NL = g.n * L;
#pragma omp parallel for schedule(static) if (NL * g.c * g.kh * g.kw >= kParallelMinWork)
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    const int64_t img = p / g.c, ci = p % g.c;
    T* plane = x + p * g.h * g.w;
    std::fill(plane, plane + g.h * g.w, T(0));
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t r = (ci * g.kh + i) * g.kw + j;
        const T* src = cols + r * NL + img * L;
        int64_t lo, hi;
        valid_range(j, g.sw, g.pw, g.w, g.wo, lo, hi);
        for (int64_t oy = 0; oy < g.ho; ++oy) {
          const int64_t iy = oy * g.sh - g.ph + i;
          if (iy < 0 || iy >= g.h) continue;
          T* dst = plane + iy * g.w - g.pw + j;
          const T* s = src + oy * g.wo;
          if (g.sw == 1) {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += s[ox];
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox * g.sw] += s[ox];
          }
        }
      }
    }
  }
}

// C: T, or f32 beside 16-bit operands (GemmArgs::wide_c: the 16-bit path's products).
template <class T, class C = T>
GemmArgs gemm_args(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                   int64_t ldb, C* c, int64_t ldc, double beta, bool bf16_values) {
  GemmArgs args;
  args.dtype = dtype_v<T>;
  args.wide_c = !std::is_same_v<T, C>;
  args.bf16_products = bf16_values && !args.wide_c;
  args.trans_a = ta;
  args.trans_b = tb;
  args.m = m; args.n = n; args.k = k;
  args.a = a; args.lda = lda;
  args.b = b; args.ldb = ldb;
  args.c = c; args.ldc = ldc;
  args.beta = beta;
  return args;
}

// Convolutions whose GEMM inner dimension K = c * kh * kw is tiny (an image model's first layer: one
// input channel, 3x3) leave Eigen's GEMM tiles mostly idle in the weight gradient ([O, K] from
// products over the pixels); it runs as K dot products per (image, o) instead, with the bias
// gradient summed in the same pass over dy. (The forward keeps the GEMM: there the output's write
// dominates, and the bias fill + accumulate in L2-sized chunks measured faster than a hand loop.)
constexpr int64_t kSmallK = 16;

// dw[k] += sum_q dy[q] * cols[k * ld + q] for k < K, and *db += sum_q dy[q] (when db), q < L: one
// pass over dy with K + 1 vector accumulators, lanes and tail added in a fixed order.
template <class T>
void small_k_dots(const T* dy, const T* cols, int64_t ld, int64_t L, int64_t K, T* dw, T* db) {
  if constexpr (std::is_same_v<T, float>)  // K + 1 64-byte sums are 2K + 2 ymm registers: in groups
    if (avx2::lanes_usable()) return avx2::small_k_dots_f32(dy, cols, ld, L, K, dw, db);
  using V = typename SumVec<T>::type;
  constexpr int W = SumVec<T>::kWidth;
  V acc[kSmallK] = {}, acc_b = {};
  int64_t q = 0;
  for (; q + W <= L; q += W) {
    const V d = vload(dy + q);
    acc_b += d;
    for (int64_t k = 0; k < K; ++k) acc[k] += d * vload(cols + k * ld + q);
  }
  for (int64_t k = 0; k < K; ++k) {
    T sum = hsum<T>(acc[k]);
    for (int64_t t = q; t < L; ++t) sum += dy[t] * cols[k * ld + t];
    dw[k] += sum;
  }
  if (db) {
    T sum = hsum<T>(acc_b);
    for (int64_t t = q; t < L; ++t) sum += dy[t];
    *db += sum;
  }
}

// f16 or bf16: the storage types of the 16-bit path (below).
template <class T>
constexpr bool kHalfOrBf16 = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// small_k_dots of 16-bit dy and cols (the 16-bit path, which runs where AVX2 does): widened as they
// are read, the same sums as over widened copies.
template <class S>
void small_k_dots_widening(const S* dy, const S* cols, int64_t ld, int64_t L, int64_t K, float* dw, float* db) {
  static_assert(kHalfOrBf16<S>, "small_k_dots_widening: f32 sums of f16 or bf16 values");
  avx2::small_k_dots_16bit(reinterpret_cast<const uint16_t*>(dy), reinterpret_cast<const uint16_t*>(cols), ld, L, K,
                           dw, db, std::is_same_v<S, half>);
}

// Output maps this small (a 4x4 map or less: ResNet's last stages at CIFAR size) make the per-image
// products thin ([O, K] @ [K, L]); the chunk's pixels then go through one product instead.
constexpr int64_t kFlatPixels = 16;
inline bool flat_pixels(int64_t L) { return L <= kFlatPixels; }

// out [O, n*L]: image img's [O, L] block of dy [n, O, L] at columns img*L .. img*L + L.
template <class T>
void gather_pixels(const T* dy, int64_t n, int64_t O, int64_t L, T* out) {
#pragma omp parallel for schedule(static) if (n * O * L >= kParallelMinWork)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t img = 0; img < n; ++img)
      for (int64_t q = 0; q < L; ++q) out[o * n * L + img * L + q] = dy[(img * O + o) * L + q];
}

// A chunk of activations stored as Ts, computed in T: where Ts is T the values as they lie; else
// (f16/bf16 storage, f32 compute) widened into the slot's scratch (in()), or computed in the slot's
// scratch and rounded into place once done (out(), then store()).
template <class T, class Ts>
const T* chunk_in(const Ts* p, int64_t n, Scratch slot) {
  if constexpr (std::is_same_v<T, Ts>) {
    return p;
  } else {
    T* s = thread_scratch<T>(slot, n);
    convert_host(p, dtype_v<Ts>, s, dtype_v<T>, n);
    return s;
  }
}
template <class T, class Ts>
T* chunk_out(Ts* p, int64_t n) {
  if constexpr (std::is_same_v<T, Ts>) return p;
  else return thread_scratch<T>(Scratch::ConvChunkOut, n);
}
template <class T, class Ts>
void chunk_store(const T* computed, Ts* p, int64_t n) {
  if constexpr (!std::is_same_v<T, Ts>) convert_host(computed, dtype_v<T>, p, dtype_v<Ts>, n);
}

// The 16-bit path (Direct, for f16/bf16 storage Ts and f32 compute T where cpu_gemm_reads_16bit):
// the GEMMs' operands are Ts as they lie (x's and dy's chunks, the weights) and the columns are
// built in Ts, half the bytes im2col writes and the GEMM's packing reads, with no widened copy of a
// chunk between; the GEMM widens each value as it packs it (or multiplies bf16 pairs) into the same
// f32 results as before, which are rounded once, and the sums the GEMM does not make (the tiny-K
// dots, the bias's) widen with AVX2, which cpu_gemm_reads_16bit promises. The values multiplied and
// the order of their sums are the widened path's, so are the bits. Operand: the element type of the
// GEMMs' operands.
template <class T, class Ts, bool Direct>
using Operand = std::conditional_t<Direct, Ts, T>;

// im2col on the values' bits: 16-bit values move as uint16_t (0 is +0 in f16 and in bf16), whose
// select loop the compiler vectorises (it does not through half's class).
template <class T>
void im2col_of(const Conv2dGeometry& g, const T* x, T* cols) {
  if constexpr (sizeof(T) == 2)
    im2col_t(g, reinterpret_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(cols));
  else
    im2col_t(g, x, cols);
}

// sum_of<T> over n values stored as S, the widened path's bits: a 16-bit row is summed as it is
// widened (avx2::sum_16bit, sum_of's order; the 16-bit path runs where AVX2 does).
template <class T, class S>
T row_sum(const S* p, int64_t n) {
  if constexpr (std::is_same_v<T, S>) {
    return sum_of<T>(p, n);
  } else {
    static_assert(std::is_same_v<T, float> && kHalfOrBf16<S>, "row_sum: f32 sums of f16 or bf16 values");
    return avx2::sum_16bit(reinterpret_cast<const uint16_t*>(p), n, std::is_same_v<S, half>);
  }
}

template <class T, class Ts = T, bool Direct = false>
void forward_t(const Ts* x, const Operand<T, Ts, Direct>* w, const T* b, Ts* y, const Conv2dGeometry& g,
               bool bf16_values = false) {
  using Op = Operand<T, Ts, Direct>;
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g);
  Op* cols = thread_scratch<Op>(Scratch::ConvColumns, K * chunk * L);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    Conv2dGeometry gc = g;
    gc.n = std::min(chunk, g.n - n0);
    const int64_t NL = gc.n * L;
    im2col_of(gc, chunk_in<Op>(x + n0 * g.c * g.h * g.w, gc.n * g.c * g.h * g.w, Scratch::ConvChunkIn), cols);
    // y[img] [O, L] = bias + w [O, K] @ cols[:, img*L : (img+1)*L], one strided-batched GEMM over the
    // chunk, written straight into y (no [O, nc*L] staging copy). The bias is stored first and the
    // GEMM accumulates onto it (beta = 1): Eigen zeroes C for beta = 0, so this saves a pass over y.
    T* yc = chunk_out<T>(y + n0 * O * L, gc.n * O * L);
    if (flat_pixels(L)) {
      // One product over the chunk's pixels, [O, K] @ [K, nc*L], then each image's [O, L] block
      // moved into y with the bias: per-image products would be [O, K] @ [K, L] with L tiny, each
      // one re-reading (and the GEMM re-packing) the whole weight.
      T* t = thread_scratch<T>(Scratch::ConvPixels, O * NL);
      gemm(kCPU)(kCPU, gemm_args<Op>(false, false, O, NL, K, w, K, cols, NL, t, NL, 0.0, bf16_values));
#pragma omp parallel for schedule(static) if (gc.n * O * L >= kParallelMinWork)
      for (int64_t p = 0; p < gc.n * O; ++p) {
        const int64_t img = p / O, o = p % O;
        const T bias = b ? b[o] : T(0);
        for (int64_t q = 0; q < L; ++q) yc[p * L + q] = t[o * NL + img * L + q] + bias;
      }
      chunk_store(yc, y + n0 * O * L, gc.n * O * L);
      continue;
    }
    if (b) {
#pragma omp parallel for schedule(static) if (gc.n * O * L >= kParallelMinWork)
      for (int64_t p = 0; p < gc.n * O; ++p) std::fill_n(yc + p * L, L, b[p % O]);
    }
    GemmArgs fw = gemm_args<Op>(false, false, O, L, K, w, K, cols, NL, yc, L, b ? 1.0 : 0.0, bf16_values);
    fw.batch = gc.n;
    fw.stride_b = L;
    fw.stride_c = O * L;
    gemm(kCPU)(kCPU, fw);
    chunk_store(yc, y + n0 * O * L, gc.n * O * L);
  }
}

template <class T, class Ts = T, bool Direct = false>
void backward_input_t(const Ts* dy, const Operand<T, Ts, Direct>* w, Ts* dx, const Conv2dGeometry& g,
                      bool bf16_values = false) {
  using Op = Operand<T, Ts, Direct>;
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g), chw = g.c * g.h * g.w;
  T* dcols = thread_scratch<T>(Scratch::ConvColumns, K * chunk * L);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    Conv2dGeometry gc = g;
    gc.n = std::min(chunk, g.n - n0);
    const int64_t NL = gc.n * L;
    const Op* dyc = chunk_in<Op>(dy + n0 * O * L, gc.n * O * L, Scratch::ConvChunkGrad);
    T* dxc = chunk_out<T>(dx + n0 * chw, gc.n * chw);
    if (flat_pixels(L)) {
      // dy's images side by side, [O, nc*L], then one product w^T [K, O] @ it (as the forward).
      Op* t = thread_scratch<Op>(Scratch::ConvPixels, O * NL);
      gather_pixels(dyc, gc.n, O, L, t);
      gemm(kCPU)(kCPU, gemm_args<Op>(true, false, K, NL, O, w, K, t, NL, dcols, NL, 0.0, bf16_values));
    } else {
      // dcols[:, img*L : (img+1)*L] = w^T [K, O] @ dy[img] [O, L], batched over the chunk's images
      GemmArgs bi = gemm_args<Op>(true, false, K, L, O, w, K, dyc, L, dcols, NL, 0.0, bf16_values);
      bi.batch = gc.n;
      bi.stride_b = O * L;
      bi.stride_c = L;
      gemm(kCPU)(kCPU, bi);
    }
    col2im_t(gc, dcols, dxc);
    chunk_store(dxc, dx + n0 * chw, gc.n * chw);
  }
}

template <class T, class Ts = T, bool Direct = false>
void backward_weight_t(const Ts* x, const Ts* dy, T* dw, T* db, const Conv2dGeometry& g, bool bf16_values = false) {
  using Op = Operand<T, Ts, Direct>;
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g);
  Op* cols = thread_scratch<Op>(Scratch::ConvColumns, K * chunk * L);
  if (db) std::fill(db, db + O, T(0));
  if (g.n == 0) std::fill(dw, dw + O * K, T(0));
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    Conv2dGeometry gc = g;
    gc.n = std::min(chunk, g.n - n0);
    const int64_t NL = gc.n * L;
    im2col_of(gc, chunk_in<Op>(x + n0 * g.c * g.h * g.w, gc.n * g.c * g.h * g.w, Scratch::ConvChunkIn), cols);
    const Op* dyc = chunk_in<Op>(dy + n0 * O * L, gc.n * O * L, Scratch::ConvChunkGrad);
    if (K <= kSmallK) {
      if (n0 == 0) std::fill(dw, dw + O * K, T(0));
      // Each o's sums run over the images in order (deterministic whatever the thread count).
#pragma omp parallel for schedule(static) if (gc.n * O * L >= kParallelMinWork)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t img = 0; img < gc.n; ++img)
          if constexpr (Direct)
            small_k_dots_widening(dyc + (img * O + o) * L, cols + img * L, NL, L, K, dw + o * K, db ? db + o : nullptr);
          else
            small_k_dots(dyc + (img * O + o) * L, cols + img * L, NL, L, K, dw + o * K, db ? db + o : nullptr);
      continue;  // db summed with the dots
    }
    if (flat_pixels(L)) {
      // dw [O, K] += dy's images side by side [O, nc*L] @ cols^T: one product whose sums run over the
      // chunk's pixels, rather than a rank-L update of all of dw per image.
      Op* t = thread_scratch<Op>(Scratch::ConvPixels, O * NL);
      gather_pixels(dyc, gc.n, O, L, t);
      gemm(kCPU)(kCPU, gemm_args<Op>(false, true, O, K, NL, t, NL, cols, NL, dw, K, n0 == 0 ? 0.0 : 1.0, bf16_values));
    } else {
      // dw [O, K] += dy[img] [O, L] @ cols[:, img*L : (img+1)*L]^T, image after image (one GEMM per
      // image reads dy in place; measured faster than transposing dy into one GEMM per chunk).
      for (int64_t img = 0; img < gc.n; ++img) {
        const bool first = n0 == 0 && img == 0;
        gemm(kCPU)(kCPU, gemm_args<Op>(false, true, O, K, L, dyc + img * O * L, L, cols + img * L, NL, dw, K,
                                       first ? 0.0 : 1.0, bf16_values));
      }
    }
    if (db) {
      // db[o] = sum over images (in order, chunk after chunk) of the sum of dy[img, o, :]
#pragma omp parallel for schedule(static) if (gc.n * O * L >= kParallelMinWork)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t img = 0; img < gc.n; ++img) db[o] += row_sum<T>(dyc + (img * O + o) * L, L);
    }
  }
}

// Kernel taps that read only padding for every output pixel (a 3x3 conv on a 1x1 map reads its
// centre alone; on ResNet's last stage at CIFAR size 8 of 9 taps are dead) contribute exact zeros:
// the convolution runs on the taps [i0, i1) x [j0, j1) that reach the image, a K up to 9x smaller,
// as the same convolution with that window of the weight and the padding moved with it.
struct LiveTaps {
  int64_t i0 = 0, i1 = 0, j0 = 0, j1 = 0;
};

// The first and one past the last tap along one axis whose input index lies in the image for some
// output index (the taps between them are kept even if dead: they add zeros).
inline void live_axis(int64_t k, int64_t stride, int64_t pad, int64_t in, int64_t out, int64_t& t0, int64_t& t1) {
  t0 = k;
  t1 = 0;
  for (int64_t t = 0; t < k; ++t) {
    int64_t lo, hi;
    valid_range(t, stride, pad, in, out, lo, hi);
    if (lo < hi) {
      t0 = std::min(t0, t);
      t1 = t + 1;
    }
  }
  if (t1 <= t0) t0 = t1 = 0;  // no tap reaches the image (an empty output): nothing to prune to
}

// The taps to run, or nullopt when all of them reach the image.
inline bool prunable(const Conv2dGeometry& g, LiveTaps& t) {
  live_axis(g.kh, g.sh, g.ph, g.h, g.ho, t.i0, t.i1);
  live_axis(g.kw, g.sw, g.pw, g.w, g.wo, t.j0, t.j1);
  return t.i1 > t.i0 && t.j1 > t.j0 && (t.i1 - t.i0 < g.kh || t.j1 - t.j0 < g.kw);
}

// The same convolution over the live taps: a kh' x kw' window whose tap i' is the old i0 + i', so the
// input row oy*sh - ph + i0 + i' = oy*sh - (ph - i0) + i'. The output size stays what it was (the
// padding is now uneven; im2col and col2im use ho, wo and bounds checks, not the padding's symmetry).
inline Conv2dGeometry on_live_taps(Conv2dGeometry g, const LiveTaps& t) {
  g.kh = t.i1 - t.i0;
  g.kw = t.j1 - t.j0;
  g.ph -= t.i0;
  g.pw -= t.j0;
  return g;
}

// w [O, C, kh, kw] <-> its window [O, C, kh', kw'] (copy in, or scatter out with zeros elsewhere).
template <class T>
void window_of(const Conv2dGeometry& g, const LiveTaps& t, const T* w, T* out) {
  const int64_t kh = t.i1 - t.i0, kw = t.j1 - t.j0;
  for (int64_t p = 0; p < g.o * g.c; ++p)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) out[(p * kh + i) * kw + j] = w[(p * g.kh + t.i0 + i) * g.kw + t.j0 + j];
}
template <class T>
void scatter_window(const Conv2dGeometry& g, const LiveTaps& t, const T* win, T* w) {
  const int64_t kh = t.i1 - t.i0, kw = t.j1 - t.j0;
  std::fill(w, w + g.o * g.k(), T(0));
  for (int64_t p = 0; p < g.o * g.c; ++p)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) w[(p * g.kh + t.i0 + i) * g.kw + t.j0 + j] = win[(p * kh + i) * kw + j];
}

// T: the computation's type (and the weights'); Ts: the activations' storage (T, or f16/bf16 for f32);
// Direct: the 16-bit path (weights in Ts).
template <class T, class Ts = T, bool Direct = false>
void forward_live(const Ts* x, const Operand<T, Ts, Direct>* w, const T* b, Ts* y, const Conv2dGeometry& g,
                  bool bf16_values = false) {
  LiveTaps t;
  if (!prunable(g, t)) return forward_t<T, Ts, Direct>(x, w, b, y, g, bf16_values);
  const Conv2dGeometry p = on_live_taps(g, t);
  std::vector<Operand<T, Ts, Direct>> win(static_cast<size_t>(p.o * p.k()));
  window_of(g, t, w, win.data());
  forward_t<T, Ts, Direct>(x, win.data(), b, y, p, bf16_values);
}

template <class T, class Ts = T, bool Direct = false>
void backward_input_live(const Ts* dy, const Operand<T, Ts, Direct>* w, Ts* dx, const Conv2dGeometry& g,
                         bool bf16_values = false) {
  LiveTaps t;
  if (!prunable(g, t)) return backward_input_t<T, Ts, Direct>(dy, w, dx, g, bf16_values);
  const Conv2dGeometry p = on_live_taps(g, t);
  std::vector<Operand<T, Ts, Direct>> win(static_cast<size_t>(p.o * p.k()));
  window_of(g, t, w, win.data());
  backward_input_t<T, Ts, Direct>(dy, win.data(), dx, p, bf16_values);
}

template <class T, class Ts = T, bool Direct = false>
void backward_weight_live(const Ts* x, const Ts* dy, T* dw, T* db, const Conv2dGeometry& g, bool bf16_values = false) {
  LiveTaps t;
  if (!prunable(g, t)) return backward_weight_t<T, Ts, Direct>(x, dy, dw, db, g, bf16_values);
  const Conv2dGeometry p = on_live_taps(g, t);
  std::vector<T> win(static_cast<size_t>(p.o * p.k()));
  backward_weight_t<T, Ts, Direct>(x, dy, win.data(), db, p, bf16_values);
  scatter_window(g, t, win.data(), dw);  // the dead taps' gradient: exactly 0
}

// f16/bf16 run the f32 path: the activations widened chunk by chunk (above), the weights and biases
// as whole copies; for bf16 the widened values are exactly bf16, so the GEMMs may multiply them as
// bf16 pairs (GemmArgs::bf16_products) with the same products. Where the CPU GEMM reads the 16-bit
// type as it lies (cpu_gemm_reads_16bit), the 16-bit path instead (Direct, above; biases widened).
Tensor widened(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor r = Tensor::empty(t.shape(), DType::f32, t.device());
  convert_host(t.data_ptr(), t.dtype(), r.data_ptr(), DType::f32, t.numel());
  return r;
}
void narrow_into(const Tensor& f, Tensor& dst) {
  if (dst.defined()) convert_host(f.data_ptr(), DType::f32, dst.data_ptr(), dst.dtype(), dst.numel());
}
Tensor like_f32(const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), DType::f32, t.device()) : t; }

template <class T>
const T* ptr(const Tensor& t) { return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr; }
template <class T>
T* mptr(Tensor& t) { return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr; }

void cpu_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2dGeometry& g) {
  dispatch_floating(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      forward_live<T>(ptr<T>(x), ptr<T>(w), ptr<T>(b), mptr<T>(y), g);
    } else {
      if constexpr (kHalfOrBf16<T>)
        if (cpu_gemm_reads_16bit(x.dtype()))
          return forward_live<float, T, true>(ptr<T>(x), ptr<T>(w), ptr<float>(widened(b)), mptr<T>(y), g,
                                              std::is_same_v<T, bfloat16>);
      forward_live<float, T>(ptr<T>(x), ptr<float>(widened(w)), ptr<float>(widened(b)), mptr<T>(y), g,
                             std::is_same_v<T, bfloat16>);
    }
  });
}

void cpu_conv2d_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dGeometry& g) {
  dispatch_floating(dy.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      backward_input_live<T>(ptr<T>(dy), ptr<T>(w), mptr<T>(dx), g);
    } else {
      if constexpr (kHalfOrBf16<T>)
        if (cpu_gemm_reads_16bit(dy.dtype()))
          return backward_input_live<float, T, true>(ptr<T>(dy), ptr<T>(w), mptr<T>(dx), g,
                                                     std::is_same_v<T, bfloat16>);
      backward_input_live<float, T>(ptr<T>(dy), ptr<float>(widened(w)), mptr<T>(dx), g, std::is_same_v<T, bfloat16>);
    }
  });
}

// f32 dw, db of x and dy stored as T (f16/bf16, or another type dispatch_floating refuses): the 16-bit
// path where the GEMM reads T, else the widened one.
template <class T>
void backward_weight_of(const T* x, const T* dy, float* dw, float* db, const Conv2dGeometry& g) {
  constexpr bool bf16 = std::is_same_v<T, bfloat16>;
  if constexpr (kHalfOrBf16<T>)
    if (cpu_gemm_reads_16bit(dtype_v<T>)) return backward_weight_live<float, T, true>(x, dy, dw, db, g, bf16);
  backward_weight_live<float, T>(x, dy, dw, db, g, bf16);
}

void cpu_conv2d_backward_weight(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor& db,
                                const Conv2dGeometry& g) {
  dispatch_floating(dy.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      backward_weight_live<T>(ptr<T>(x), ptr<T>(dy), mptr<T>(dw), mptr<T>(db), g);
    } else {
      Tensor dwf = like_f32(dw), dbf = like_f32(db);
      backward_weight_of<T>(ptr<T>(x), ptr<T>(dy), mptr<float>(dwf), mptr<float>(dbf), g);
      narrow_into(dwf, dw);
      narrow_into(dbf, db);
    }
  });
}

void cpu_im2col(Device, DType dtype, const Conv2dGeometry& g, const void* x, void* cols) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      im2col_t<T>(g, static_cast<const T*>(x), static_cast<T*>(cols));
  }, "im2col", DTypeSet::Float32Or64);
}

void cpu_col2im(Device, DType dtype, const Conv2dGeometry& g, const void* cols, void* x) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      col2im_t<T>(g, static_cast<const T*>(cols), static_cast<T*>(x));
  }, "col2im", DTypeSet::Float32Or64);
}

TANDEM_REGISTER_KERNEL(conv2d_forward, DeviceKind::CPU, cpu_conv2d_forward);
TANDEM_REGISTER_KERNEL(conv2d_backward_input, DeviceKind::CPU, cpu_conv2d_backward_input);
TANDEM_REGISTER_KERNEL(conv2d_backward_weight, DeviceKind::CPU, cpu_conv2d_backward_weight);
TANDEM_REGISTER_KERNEL(im2col, DeviceKind::CPU, cpu_im2col);
TANDEM_REGISTER_KERNEL(col2im, DeviceKind::CPU, cpu_col2im);

}  // namespace
}  // namespace tandem::kernels
