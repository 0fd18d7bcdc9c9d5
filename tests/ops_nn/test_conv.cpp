// conv2d: forward and gradients against PyTorch, finite-difference gradcheck in f64, im2col/col2im
// adjointness, 16-bit inputs, and the shape errors.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "kernels/cpu/gemm_avx512.h"
#include "runtime/backend/conv.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(Conv2d, ForwardAndGradsMatchTorchStride2) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
    Tensor x = ref(r::conv1_x, {2, 3, 7, 6}, dt, true), w = ref(r::conv1_w, {4, 3, 3, 2}, dt, true),
           b = ref(r::conv1_b, {4}, dt, true);
    Tensor y = ops::conv2d(x, w, b, {2, 1}, {1, 0});
    ASSERT_EQ(y.shape(), (Shape{2, 4, 4, 5}));
    expect_close(y, r::conv1_y, tol, tol);
    auto g = grads_of(y, {x, w, b}, r::conv1_r);
    expect_close(g[0], r::conv1_gx, tol, tol);
    expect_close(g[1], r::conv1_gw, tol, tol);
    expect_close(g[2], r::conv1_gb, tol, tol);
  }
}

TEST(Conv2d, ForwardAndGradsMatchTorchPadded) {
  Tensor x = ref(r::conv2_x, {1, 2, 5, 5}, DType::f32, true), w = ref(r::conv2_w, {3, 2, 3, 3}, DType::f32, true);
  Tensor y = ops::conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  expect_close(y, r::conv2_y, 1e-5, 1e-5);
  auto g = grads_of(y, {x, w}, r::conv2_r);
  expect_close(g[0], r::conv2_gx, 1e-5, 1e-5);
  expect_close(g[1], r::conv2_gw, 1e-5, 1e-5);
}

TEST(Conv2d, GradcheckStridePaddingOddSizes) {
  struct Case { Shape x, w; std::array<int64_t, 2> stride, pad; bool bias; };
  for (const Case& c : {Case{{2, 3, 5, 4}, {2, 3, 3, 3}, {2, 2}, {1, 1}, true},
                        Case{{1, 2, 6, 5}, {3, 2, 2, 3}, {1, 2}, {0, 1}, false},
                        Case{{2, 1, 4, 4}, {2, 1, 1, 1}, {1, 1}, {0, 0}, true}}) {
    Tensor x = random_leaf(c.x, 1), w = random_leaf(c.w, 2), b = c.bias ? random_leaf({c.w[0]}, 3) : Tensor();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    expect_gradcheck([&](const std::vector<Tensor>& t) {
      return ops::conv2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.pad);
    }, in);
  }
}

TEST(Conv2d, OnlyWeightNeedsGrad) {
  // The cnn's first layer: the input needs no gradient, so backward skips dX.
  Tensor x = random_leaf({2, 1, 5, 5}, 4).detach(), w = random_leaf({3, 1, 3, 3}, 5);
  expect_gradcheck([&](const std::vector<Tensor>& t) { return ops::conv2d(x, t[0], Tensor(), {1, 1}, {1, 1}); }, {w});
}

TEST(Conv2d, Im2colCol2imAreAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for every geometry: col2im is exactly the transpose of im2col.
  kernels::Conv2dGeometry g;
  g.n = 2; g.c = 3; g.h = 7; g.w = 6; g.o = 1; g.kh = 3; g.kw = 2; g.sh = 2; g.sw = 3; g.ph = 1; g.pw = 1;
  g.ho = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.wo = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  Generator gen(9);
  Tensor x = rand_uniform({g.n, g.c, g.h, g.w}, -1, 1, gen, DType::f64);
  Tensor c = rand_uniform({g.k(), g.n * g.l()}, -1, 1, gen, DType::f64);
  Tensor cols = Tensor::empty(c.shape(), DType::f64), xt = Tensor::empty(x.shape(), DType::f64);
  kernels::im2col(kCPU)(kCPU, DType::f64, g, x.data_ptr(), cols.data_ptr());
  kernels::col2im(kCPU)(kCPU, DType::f64, g, c.data_ptr(), xt.data_ptr());
  double lhs = 0, rhs = 0;
  auto cv = cols.to_vector<double>(), ccv = c.to_vector<double>(), xv = x.to_vector<double>(), xtv = xt.to_vector<double>();
  for (size_t i = 0; i < cv.size(); ++i) lhs += cv[i] * ccv[i];
  for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * xtv[i];
  EXPECT_NEAR(lhs, rhs, 1e-10);
}

TEST(Conv2d, HalfAndBfloat16ComputeViaF32) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = ref(r::conv1_x, {2, 3, 7, 6}, dt, true), w = ref(r::conv1_w, {4, 3, 3, 2}, dt, true),
           b = ref(r::conv1_b, {4}, dt, true);
    Tensor y = ops::conv2d(x, w, b, {2, 1}, {1, 0});
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, r::conv1_y, 0.06, 0.02);  // inputs rounded to 8 (bf16) / 11 (f16) bits
    auto g = grads_of(y, {x, w, b}, r::conv1_r);
    EXPECT_EQ(g[1].dtype(), dt);
    expect_close(g[1], r::conv1_gw, 0.1, 0.03);
  }
}

// f16/bf16 convolutions: the f32 convolution of the same values, rounded once, bit for bit. The
// activations are widened and rounded chunk by chunk of images (conv.cpp's chunk_images), the
// weights as whole copies; or, where the GEMM reads 16-bit operands as they lie (the AVX2 kernel:
// test_ops_nn_avx2; bf16 pairs), they stay 16-bit into the GEMM (conv.cpp's 16-bit path). Over
// several chunks, on each of the paths: the GEMM per image, the tiny-K dot products of the weight
// gradient, one product over the pixels of small maps, a strided im2col, dead taps pruned, with and
// without a bias. (bf16's GEMMs may multiply as bf16 pairs, which sums in another order on
// AVX512-BF16: there f16 alone is exact.)
TEST(Conv2d, HalfActivationsChunkByChunkEqualF32Rounded) {
  struct Case {
    Shape x, w;
    std::array<int64_t, 2> stride;
    bool bias;
  };
  // 3 chunks each for the first three: [40, 3, 16, 16] (K 27, 18 images a chunk), [120, 1, 16, 16]
  // (K 9: the dots, 56 a chunk), [64, 32, 4, 4] with 32 outputs (16 pixels: one product over them,
  // 28 a chunk); then stride 2 without a bias (the general im2col and col2im), and 1x1 maps whose
  // 3x3 kernels see padding but for the centre (K 20 after pruning: the product over the pixels;
  // K 3: the dots, without a bias).
  const Case cases[] = {{{40, 3, 16, 16}, {8, 3, 3, 3}, {1, 1}, true},  {{120, 1, 16, 16}, {8, 1, 3, 3}, {1, 1}, true},
                        {{64, 32, 4, 4}, {32, 32, 3, 3}, {1, 1}, true}, {{6, 5, 9, 11}, {7, 5, 3, 3}, {2, 2}, false},
                        {{4, 20, 1, 1}, {4, 20, 3, 3}, {1, 1}, true},   {{4, 3, 1, 1}, {4, 3, 3, 3}, {1, 1}, false}};
  for (const Case& c : cases) {
    for (DType dt : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " x " << shape_str(c.x) << " stride " << c.stride[0]
                                        << " bias " << c.bias);
      // Values k / 64 with |k| < 128: exact in f16 and bf16, so both runs see the same inputs.
      auto values = [](const Shape& s, int seed) {
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        std::vector<double> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[size_t(i)] = static_cast<double>((i * 37 + seed) % 255 - 127) / 64;
        return v;
      };
      const std::vector<double> xv = values(c.x, 1), wv = values(c.w, 5), bv = values({c.w[0]}, 9);
      Tensor x16 = ref(xv, c.x, dt, true), w16 = ref(wv, c.w, dt, true);
      Tensor x32 = ref(xv, c.x, DType::f32, true), w32 = ref(wv, c.w, DType::f32, true);
      Tensor b16 = c.bias ? ref(bv, {c.w[0]}, dt, true) : Tensor();
      Tensor b32 = c.bias ? ref(bv, {c.w[0]}, DType::f32, true) : Tensor();
      Tensor y16 = ops::conv2d(x16, w16, b16, c.stride, {1, 1}), y32 = ops::conv2d(x32, w32, b32, c.stride, {1, 1});
      const std::vector<double> r = values(y16.shape(), 3);
      std::vector<Tensor> in16 = {x16, w16}, in32 = {x32, w32};
      if (c.bias) {
        in16.push_back(b16);
        in32.push_back(b32);
      }
      auto g16 = grads_of(y16, in16, r), g32 = grads_of(y32, in32, r);
      const bool pairs_differ = dt == DType::bf16 && tandem::cpu_isa_usable(tandem::CpuIsa::avx512);
      auto rounded = [&](const Tensor& t) { return ref(t.to_vector<double>(), t.shape(), dt).to_vector<double>(); };
      const char* names[] = {"y", "dx", "dw", "db"};
      std::vector<Tensor> got = {y16}, want = {y32};
      got.insert(got.end(), g16.begin(), g16.end());
      want.insert(want.end(), g32.begin(), g32.end());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE(names[i]);
        EXPECT_EQ(got[i].dtype(), dt);
        if (pairs_differ)
          expect_close(got[i], want[i].to_vector<double>(), 0.02, 0.02);
        else
          EXPECT_EQ(got[i].to_vector<double>(), rounded(want[i]));
      }
    }
  }
}

// Which path the test above exercises: where our kernels run, the GEMM reads f16 (AVX2, AVX-512) and
// bf16 (AVX2, or pairs on AVX512-BF16) operands as they lie, so 16-bit convolutions take their
// 16-bit path; Eigen widens copies.
TEST(Conv2d, SixteenBitPathWhereTheGemmReadsSixteenBitOperands) {
  EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f32));
  EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f64));
  const std::string isa = kernels::cpu_f32_gemm_isa();
  if (isa == "avx2") {
    EXPECT_TRUE(kernels::cpu_gemm_reads_16bit(DType::f16));
    EXPECT_TRUE(kernels::cpu_gemm_reads_16bit(DType::bf16));
  } else if (isa == "eigen") {
    EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f16));
    EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::bf16));
  } else {  // AVX-512: f16 widened in the packing; bf16 as pairs where the CPU multiplies them
    EXPECT_TRUE(kernels::cpu_gemm_reads_16bit(DType::f16));
    EXPECT_EQ(kernels::cpu_gemm_reads_16bit(DType::bf16), std::string(kernels::cpu_bf16_gemm_path()) != "fp32");
  }
}

// y[n, o, oy, ox] = b[o] + sum over c, i, j of x[n, c, oy*sh - ph + i, ox*sw - pw + j] w[o, c, i, j]
// (zero outside the image), in f64 by loops: what the im2col + GEMM paths must equal.
std::vector<double> direct_conv(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int64_t, 2> s,
                                std::array<int64_t, 2> p) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), KH = w.size(2),
                KW = w.size(3), HO = (H + 2 * p[0] - KH) / s[0] + 1, WO = (W + 2 * p[1] - KW) / s[1] + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(),
                            bv = b.defined() ? b.to_vector<double>() : std::vector<double>(O, 0.0);
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox) {
          double acc = bv[o];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t iy = oy * s[0] - p[0] + i, ix = ox * s[1] - p[1] + j;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                  acc += xv[((n * C + c) * H + iy) * W + ix] * wv[((o * C + c) * KH + i) * KW + j];
              }
          y.push_back(acc);
        }
  return y;
}

// Small output maps (one product over the chunk's pixels) and taps that read only padding (run on
// the live window of the weight; their weight gradient exactly 0): a 3x3 conv on a 1x1 map (its
// centre alone), a stride-2 3x3 conv from 2x2 to 1x1 (2x2 live taps), a 1x3 map (live rows only),
// a 7-tap kernel with stride 3 on one row (one live tap), a 4x4 map (all taps live, the flat
// product), and a larger map for contrast. Against the loops above, and gradchecked in f64.
TEST(Conv2d, SmallMapsAndDeadTapsMatchTheDirectSum) {
  struct Case { Shape x, w; std::array<int64_t, 2> stride, pad; };
  for (const Case& c : {Case{{3, 4, 1, 1}, {5, 4, 3, 3}, {1, 1}, {1, 1}}, Case{{2, 3, 2, 2}, {4, 3, 3, 3}, {2, 2}, {1, 1}},
                        Case{{2, 2, 1, 3}, {3, 2, 3, 3}, {1, 1}, {1, 1}}, Case{{2, 2, 1, 2}, {2, 2, 7, 1}, {3, 1}, {3, 0}},
                        Case{{2, 2, 4, 4}, {3, 2, 3, 3}, {1, 1}, {1, 1}}, Case{{1, 2, 6, 5}, {2, 2, 3, 3}, {1, 1}, {1, 1}}}) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = random_leaf(c.x, 11), w = random_leaf(c.w, 12), b = random_leaf({c.w[0]}, 13);
    const std::vector<double> want = direct_conv(x, w, b, c.stride, c.pad);
    const std::vector<double> got = ops::conv2d(x, w, b, c.stride, c.pad).to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    const std::vector<float> got32 =
        ops::conv2d(ops::cast(x, DType::f32), ops::cast(w, DType::f32), ops::cast(b, DType::f32), c.stride, c.pad)
            .to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got32[i], want[i], 1e-5) << i;
    expect_gradcheck([&](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t[2], c.stride, c.pad); },
                     {x, w, b});
  }
  // A dead tap's weight gradient is 0 even when its weight is not: the centre tap of a 1x1 map.
  Tensor x = random_leaf({2, 3, 1, 1}, 14).detach(), w = random_leaf({2, 3, 3, 3}, 15);
  ops::sum(ops::conv2d(x, w, Tensor(), {1, 1}, {1, 1})).backward();
  const std::vector<double> gw = w.grad().to_vector<double>();
  for (size_t k = 0; k < gw.size(); ++k) {
    if (k % 9 == 4) {
      EXPECT_NE(gw[k], 0.0) << k;
    } else {
      EXPECT_EQ(gw[k], 0.0) << k;
    }
  }
}

TEST(Conv2d, ErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({1, 3, 5, 5}), w = Tensor::zeros({2, 4, 3, 3});
  expect_value_error([&] { ops::conv2d(x, w); }, {"3 channels", "[1, 3, 5, 5]", "[2, 4, 3, 3]"});
  Tensor big = Tensor::zeros({2, 3, 7, 7});
  expect_value_error([&] { ops::conv2d(x, big); }, {"larger than the padded input", "[2, 3, 7, 7]", "[1, 3, 5, 5]"});
  EXPECT_NO_THROW(ops::conv2d(x, big, Tensor(), {1, 1}, {1, 1}));
  expect_value_error([&] { ops::conv2d(Tensor::zeros({3, 5, 5}), w); }, {"[N, C, H, W]", "[3, 5, 5]"});
  expect_value_error([&] { ops::conv2d(x, Tensor::zeros({2, 3, 3, 3}), Tensor::zeros({3})); }, {"bias", "[2]"});
  expect_value_error([&] { ops::conv2d(x, Tensor::zeros({2, 3, 3, 3}), Tensor(), {0, 1}); }, {"stride"});
}

}  // namespace tandem::testing
