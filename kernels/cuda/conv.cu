// Convolution (NCHW) of the CUDA backend: im2col / col2im kernels and the whole op as im2col + GEMM
// (cuBLAS on the GPU, the CPU GEMM under the emulator). col2im gathers per input pixel over the
// kernel taps in the CPU's order, so it needs no atomics and is bitwise the CPU's. f16/bf16 are
// widened to f32, computed, and rounded once, as on the CPU. On the GPU the whole-op tables are
// filled by cuDNN (conv_cudnn.cpp), which calls these through conv_im2col.h for comparison.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_im2col.h"
#include "runtime/backend/conv.h"
#include "runtime/backend/core.h"
#include "runtime/backend/gemm.h"
#include "runtime/backend/reduce.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

using kernels::Conv2dGeometry;
using kernels::GemmArgs;

template <class T>
__global__ void im2col_kernel(Conv2dGeometry g, const T* __restrict__ x, T* __restrict__ cols) {
  const int64_t L = g.ho * g.wo, NL = g.n * L, total = g.c * g.kh * g.kw * NL;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t r = e / NL, col = e % NL;
    const int64_t img = col / L, q = col % L, oy = q / g.wo, ox = q % g.wo;
    const int64_t ci = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    cols[e] = inside ? x[((img * g.c + ci) * g.h + iy) * g.w + ix] : T(0);
  }
}

template <class T>
__global__ void col2im_kernel(Conv2dGeometry g, const T* __restrict__ cols, T* __restrict__ x) {
  const int64_t L = g.ho * g.wo, NL = g.n * L, total = g.n * g.c * g.h * g.w;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t ix = e % g.w, iy = e / g.w % g.h, ci = e / (g.w * g.h) % g.c, img = e / (g.w * g.h * g.c);
    T acc = T(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ty = iy + g.ph - i;  // = oy * sh
      if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.ho) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tx = ix + g.pw - j;
        if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.wo) continue;
        const int64_t r = (ci * g.kh + i) * g.kw + j;
        acc += cols[r * NL + img * L + (ty / g.sh) * g.wo + tx / g.sw];
      }
    }
    x[e] = acc;
  }
}

template <class T>
__global__ void add_bias_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t total, int64_t O, int64_t L) {
  for (int64_t e = global_thread(); e < total; e += grid_threads()) y[e] += b[e / L % O];
}

template <class F>
void f32_or_f64(DType dt, const char* what, F&& f) {
  if (dt == DType::f32) f(float{});
  else if (dt == DType::f64) f(double{});
  else TANDEM_FAIL(NotSupported, "{} does not support dtype {} (f32 or f64)", what, dtype_name(dt));
}

void im2col(Device device, DType dtype, const Conv2dGeometry& g, const void* x, void* cols) {
  check_on_device("im2col", device, {});
  const int64_t total = g.k() * g.n * g.l();
  if (total == 0) return;
  f32_or_f64(dtype, "im2col", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(im2col_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(device), g,
                  static_cast<const T*>(x), static_cast<T*>(cols));
  });
}

void col2im(Device device, DType dtype, const Conv2dGeometry& g, const void* cols, void* x) {
  check_on_device("col2im", device, {});
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total == 0) return;
  f32_or_f64(dtype, "col2im", [&](auto tag) {
    using T = decltype(tag);
    TANDEM_LAUNCH(col2im_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(device), g,
                  static_cast<const T*>(cols), static_cast<T*>(x));
  });
}

// ---- whole op: im2col + GEMM in chunks of images (the column matrix of a chunk <= 2^24 elements) ----

int64_t chunk_images(const Conv2dGeometry& g) {
  const int64_t per_image = std::max<int64_t>(1, g.k() * g.l());
  return std::clamp<int64_t>((int64_t(1) << 24) / per_image, 1, std::max<int64_t>(g.n, 1));
}

GemmArgs gemm_args(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, void* c, int64_t ldc, double beta) {
  GemmArgs args;
  args.dtype = dt;
  args.trans_a = ta;
  args.trans_b = tb;
  args.m = m, args.n = n, args.k = k;
  args.a = a, args.lda = lda, args.b = b, args.ldb = ldb, args.c = c, args.ldc = ldc;
  args.beta = beta;
  return args;
}

// The compute dtype (f32 for the 16-bit types) and t in it.
DType compute_dtype(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }
Tensor widened(const Tensor& t) {
  if (!t.defined() || t.dtype() == compute_dtype(t.dtype())) return t;
  Tensor out = Tensor::empty(t.shape(), compute_dtype(t.dtype()), t.device());
  kernels::cast(t.device())(t, out);
  return out;
}
Tensor widened_out(const Tensor& t) {
  if (!t.defined() || t.dtype() == compute_dtype(t.dtype())) return t;
  return Tensor::empty(t.shape(), compute_dtype(t.dtype()), t.device());
}
void narrow_into(const Tensor& wide, Tensor& out) {
  if (out.defined() && !wide.is_same(out)) kernels::cast(out.device())(wide, out);
}

char* at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

void conv_forward(const Tensor& x16, const Tensor& w16, const Tensor& b16, Tensor& y16, const Conv2dGeometry& g) {
  const Device dev = x16.device();
  check_on_device("conv2d", dev, {&x16, &w16, &b16, &y16});
  Tensor x = widened(x16), w = widened(w16), b = widened(b16), y = widened_out(y16);
  const DType dt = x.dtype();
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g);
  if (g.n * O * L == 0) return;
  Tensor cols = Tensor::empty({K * chunk * L}, dt, dev);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    Conv2dGeometry gc = g;
    gc.n = std::min(chunk, g.n - n0);
    im2col(dev, dt, gc, at(x, n0 * g.c * g.h * g.w), cols.data_ptr());
    // y[img] [O, L] = w [O, K] @ cols[:, img*L : (img+1)*L], strided-batched over the chunk.
    GemmArgs fw = gemm_args(dt, false, false, O, L, K, w.data_ptr(), K, cols.data_ptr(), gc.n * L,
                            at(y, n0 * O * L), L, 0.0);
    fw.batch = gc.n;
    fw.stride_b = L;
    fw.stride_c = O * L;
    kernels::gemm(dev)(dev, fw);
  }
  if (b.defined()) {
    const int64_t total = g.n * O * L;
    f32_or_f64(dt, "conv2d", [&](auto tag) {
      using T = decltype(tag);
      TANDEM_LAUNCH(add_bias_kernel<T>, grid_for(total, kBlock), kBlock, 0, stream_for(dev),
                    static_cast<T*>(y.data_ptr()), static_cast<const T*>(b.data_ptr()), total, O, L);
    });
  }
  narrow_into(y, y16);
}

void conv_backward_input(const Tensor& dy16, const Tensor& w16, Tensor& dx16, const Conv2dGeometry& g) {
  const Device dev = dy16.device();
  check_on_device("conv2d backward", dev, {&dy16, &w16, &dx16});
  Tensor dy = widened(dy16), w = widened(w16), dx = widened_out(dx16);
  const DType dt = dy.dtype();
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g);
  if (g.n * g.c * g.h * g.w == 0) return;
  Tensor dcols = Tensor::empty({K * chunk * L}, dt, dev);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    Conv2dGeometry gc = g;
    gc.n = std::min(chunk, g.n - n0);
    // dcols[:, img*L : (img+1)*L] [K, L] = w^T [K, O] @ dy[img] [O, L]
    GemmArgs bw = gemm_args(dt, true, false, K, L, O, w.data_ptr(), K, at(dy, n0 * O * L), L, dcols.data_ptr(),
                            gc.n * L, 0.0);
    bw.batch = gc.n;
    bw.stride_b = O * L;
    bw.stride_c = L;
    kernels::gemm(dev)(dev, bw);
    col2im(dev, dt, gc, dcols.data_ptr(), at(dx, n0 * g.c * g.h * g.w));
  }
  narrow_into(dx, dx16);
}

void conv_backward_weight(const Tensor& x16, const Tensor& dy16, Tensor& dw16, Tensor& db16, const Conv2dGeometry& g) {
  const Device dev = x16.device();
  check_on_device("conv2d backward", dev, {&x16, &dy16, &dw16, &db16});
  Tensor x = widened(x16), dy = widened(dy16), dw = widened_out(dw16), db = widened_out(db16);
  const DType dt = x.dtype();
  const int64_t K = g.k(), L = g.l(), O = g.o, chunk = chunk_images(g);
  if (g.n == 0 || L == 0) {
    dw.zero_();
    if (db.defined()) db.zero_();
  } else {
    Tensor cols = Tensor::empty({K * chunk * L}, dt, dev);
    for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      Conv2dGeometry gc = g;
      gc.n = std::min(chunk, g.n - n0);
      im2col(dev, dt, gc, at(x, n0 * g.c * g.h * g.w), cols.data_ptr());
      // dw [O, K] += dy[img] [O, L] @ cols_img^T [L, K], images in order.
      for (int64_t img = 0; img < gc.n; ++img) {
        const bool first = n0 == 0 && img == 0;
        GemmArgs gw = gemm_args(dt, false, true, O, K, L, at(dy, (n0 + img) * O * L), L, at(cols, img * L), gc.n * L,
                                dw.data_ptr(), K, first ? 0.0 : 1.0);
        kernels::gemm(dev)(dev, gw);
      }
    }
    if (db.defined()) {
      Tensor db2 = db.view({O, 1});
      kernels::sum_to(dev)(dy.view({g.n, O, L}), db2, 1.0);
    }
  }
  narrow_into(dw, dw16);
  narrow_into(db, db16);
}

TANDEM_REGISTER_KERNEL(kernels::im2col, kKind, im2col);
TANDEM_REGISTER_KERNEL(kernels::col2im, kKind, col2im);
#ifdef TANDEM_SIMT_EMULATOR  // the GPU build registers cuDNN instead (conv_cudnn.cpp)
TANDEM_REGISTER_KERNEL(kernels::conv2d_forward, kKind, conv_forward);
TANDEM_REGISTER_KERNEL(kernels::conv2d_backward_input, kKind, conv_backward_input);
TANDEM_REGISTER_KERNEL(kernels::conv2d_backward_weight, kKind, conv_backward_weight);
#endif

}  // namespace

void conv2d_forward_im2col(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2dGeometry& g) {
  conv_forward(x, w, b, y, g);
}
void conv2d_backward_input_im2col(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dGeometry& g) {
  conv_backward_input(dy, w, dx, g);
}
void conv2d_backward_weight_im2col(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor& db, const Conv2dGeometry& g) {
  conv_backward_weight(x, dy, dw, db, g);
}
}  // namespace tandem::TANDEM_CUDA_NS
