// The CPU convolution on f16/bf16 tensors is defined as the f32 convolution of the widened values,
// rounded once: y, dx, dw and db must be exactly the rounded f32 results, bit for bit. Where the
// CPU GEMM reads 16-bit operands as they lie (the AVX2 kernel: test_conv_16bit_avx2), conv.cpp takes
// its 16-bit path (16-bit columns, no widened chunks, the tiny-K dots and the bias sums widening as
// they read); elsewhere the widened one. Both must give these bits. The geometries reach each branch:
// the tiny-K dots, the GEMMs over several chunks of images, a strided im2col, 4x4 maps (one product
// over a chunk's pixels), and taps that only see padding (pruned), with and without a bias.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_avx512.h"
#include "runtime/backend/conv.h"
#include "runtime/tensor.h"

namespace tandem {
namespace {

struct Case {
  const char* name;
  int64_t n, c, h, w, o, k, stride, pad;
  bool bias;
  kernels::Conv2dGeometry geometry() const {
    kernels::Conv2dGeometry g;
    g.n = n, g.c = c, g.h = h, g.w = w, g.o = o, g.kh = k, g.kw = k, g.sh = g.sw = stride, g.ph = g.pw = pad;
    g.ho = (h + 2 * pad - k) / stride + 1;
    g.wo = (w + 2 * pad - k) / stride + 1;
    return g;
  }
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const Case kCases[] = {
    {"TinyKBias", 3, 1, 12, 12, 8, 3, 1, 1, true},         // K = 9: the small-K dots, bias summed with them
    {"TinyKNoBias", 2, 1, 9, 7, 5, 3, 1, 1, false},
    {"ChunkedBias", 5, 4, 32, 32, 6, 3, 1, 1, true},       // K = 36, 3 images a chunk: two chunks
    {"Stride2NoBias", 2, 5, 9, 11, 7, 3, 2, 1, false},     // the general im2col / col2im
    {"FlatPixelsBias", 4, 6, 4, 4, 5, 3, 1, 1, true},      // 16 pixels: one product over the chunk
    {"DeadTapsTinyK", 2, 3, 1, 1, 4, 3, 1, 1, true},       // 1x1 map: only the centre tap, K = 3
    {"DeadTapsWideK", 3, 20, 1, 1, 4, 3, 1, 1, true},      // K = 20 after pruning: the flat product
};

Tensor randoms(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = u(gen);
  return Tensor::from_vector(v, shape, dtype);  // rounded to dtype
}
Tensor as(const Tensor& t, DType dtype) {
  return t.defined() ? Tensor::from_vector(t.to_vector<float>(), t.shape(), dtype) : t;
}
Tensor like(const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), t.dtype()) : t; }

// The 16-bit result's bits against the f32 result rounded to its dtype.
void expect_rounded_f32(const Tensor& low, const Tensor& f32, const char* what) {
  const Tensor want = as(f32, low.dtype());
  ASSERT_EQ(low.nbytes(), want.nbytes()) << what;
  std::vector<uint16_t> a(static_cast<size_t>(low.numel())), b(a.size());
  std::memcpy(a.data(), low.data_ptr(), low.nbytes());
  std::memcpy(b.data(), want.data_ptr(), want.nbytes());
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && differ++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.size() << " elements differ, the first at " << first;
}

class Conv16Bit : public ::testing::TestWithParam<std::tuple<DType, Case>> {};

TEST_P(Conv16Bit, IsTheRoundedF32ConvolutionBitForBit) {
  const auto [dtype, c] = GetParam();
  // bf16 pairs multiplied by vdpbf16ps / AMX sum in another order than f32 FMAs: there a bf16
  // convolution is not the f32 one (the pair kernels have their own tests).
  if (dtype == DType::bf16 && std::string(kernels::cpu_bf16_gemm_path()) != "fp32")
    GTEST_SKIP() << "bf16 GEMM on " << kernels::cpu_bf16_gemm_path();
  const kernels::Conv2dGeometry g = c.geometry();
  const Tensor x = randoms({g.n, g.c, g.h, g.w}, dtype, 1), w = randoms({g.o, g.c, g.kh, g.kw}, dtype, 2);
  const Tensor b = c.bias ? randoms({g.o}, dtype, 3) : Tensor();
  const Tensor dy = randoms({g.n, g.o, g.ho, g.wo}, dtype, 4);
  const Tensor x32 = as(x, DType::f32), w32 = as(w, DType::f32), b32 = as(b, DType::f32), dy32 = as(dy, DType::f32);

  Tensor y = Tensor::empty({g.n, g.o, g.ho, g.wo}, dtype), y32 = like(dy32);
  kernels::conv2d_forward(kCPU)(x, w, b, y, g);
  kernels::conv2d_forward(kCPU)(x32, w32, b32, y32, g);
  expect_rounded_f32(y, y32, "y");

  Tensor dx = like(x), dx32 = like(x32);
  kernels::conv2d_backward_input(kCPU)(dy, w, dx, g);
  kernels::conv2d_backward_input(kCPU)(dy32, w32, dx32, g);
  expect_rounded_f32(dx, dx32, "dx");

  Tensor dw = like(w), dw32 = like(w32), db = like(b), db32 = like(b32);
  kernels::conv2d_backward_weight(kCPU)(x, dy, dw, db, g);
  kernels::conv2d_backward_weight(kCPU)(x32, dy32, dw32, db32, g);
  expect_rounded_f32(dw, dw32, "dw");
  if (c.bias) expect_rounded_f32(db, db32, "db");
}

INSTANTIATE_TEST_SUITE_P(Cpu, Conv16Bit, ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                                            ::testing::ValuesIn(kCases)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, Case>>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name;
                         });

// Which path the AVX2 variant exercises: with the AVX2 kernel (and no AVX-512 kernel) the GEMM reads
// 16-bit operands, so the convolution takes its 16-bit path; f64 and f32 never do.
TEST(Conv16Bit, GemmReads16BitWhereTheAvx2KernelRuns) {
  EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f32));
  EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f64));
  if (std::string(kernels::cpu_f32_gemm_isa()) == "avx2") {
    EXPECT_TRUE(kernels::cpu_gemm_reads_16bit(DType::f16));
    EXPECT_TRUE(kernels::cpu_gemm_reads_16bit(DType::bf16));
  }
  if (std::string(kernels::cpu_f32_gemm_isa()) == "eigen") EXPECT_FALSE(kernels::cpu_gemm_reads_16bit(DType::f16));
}

}  // namespace
}  // namespace tandem
