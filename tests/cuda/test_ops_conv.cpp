// conv2d forward / backward_input / backward_weight of the CUDA backend against the CPU, one test per
// (backend, shape): cuDNN on a GPU (skipped without one), im2col + GEMM under the emulator. Shapes
// cover stride 2, padding, odd and non-square sizes, 1x1 and even kernels, with and without bias.
// Also im2col/col2im (exact) and conv2d on small shapes, among them an empty batch (ConvBackendOps).
#include <cstdlib>
#include <ostream>
#include <string>
#include <tuple>

#include "runtime/backend/conv.h"
#include "runtime/env_settings.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw;
  bool bias;
  kernels::Conv2dGeometry geometry() const {
    kernels::Conv2dGeometry g;
    g.n = n, g.c = c, g.h = h, g.w = w, g.o = o, g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw, g.ph = ph, g.pw = pw;
    g.ho = (h + 2 * ph - kh) / sh + 1;
    g.wo = (w + 2 * pw - kw) / sw + 1;
    return g;
  }
};

// gtest prints a failing parameter through this (instead of its bytes).
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

const ConvCase kCases[] = {
    {"Stride2Pad1", 2, 3, 9, 7, 5, 3, 3, 2, 2, 1, 1, true},
    {"OddRectKernelMixedStride", 3, 5, 11, 13, 7, 5, 3, 1, 2, 2, 1, true},
    {"Stride2EvenKernelNoPad", 1, 4, 8, 9, 6, 2, 2, 2, 2, 0, 0, false},
    {"Pointwise", 4, 8, 5, 5, 3, 1, 1, 1, 1, 0, 0, true},
    {"PadLargerThanInput", 2, 2, 3, 3, 4, 3, 3, 1, 1, 2, 2, false},
    {"Stride3Pad2", 2, 3, 10, 10, 2, 4, 4, 3, 3, 2, 2, true},
    {"Wide16x32", 2, 16, 17, 17, 32, 3, 3, 1, 1, 1, 1, true},
};

using ConvParam = std::tuple<DeviceKind, ConvCase>;

class ConvOps : public ::testing::TestWithParam<ConvParam> {
 protected:
  void SetUp() override {
    if (kind() == DeviceKind::CUDA && cuda::device_count() == 0)
      GTEST_SKIP() << "cuDNN conv not tested: " << cuda::describe();
  }
  DeviceKind kind() const { return std::get<0>(GetParam()); }
  Device dev() const { return Device(kind(), 0); }
  // SIM runs the CPU's GEMM in another blocking: f32 rounding. cuDNN picks its own algorithm
  // (implicit GEMM, Winograd, FFT), f32 without TF32; 16-bit data accumulates in f32, rounds once.
  double rtol(DType dt) const {
    const bool gpu = kind() == DeviceKind::CUDA;
    switch (dt) {
      case DType::f64: return 1e-10;
      case DType::f16: return gpu ? 5e-3 : 2e-3;
      case DType::bf16: return gpu ? 2e-2 : 1.6e-2;
      default: return gpu ? 1e-4 : 1e-5;
    }
  }
};

TEST_P(ConvOps, ForwardAndBothBackwardsMatchCpu) {
  const ConvCase& cc = std::get<1>(GetParam());
  const kernels::Conv2dGeometry g = cc.geometry();
  const Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.kh, g.kw}, ys{g.n, g.o, g.ho, g.wo};
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const std::string what = std::string(cc.name) + " " + dtype_name(dt);
    Tensor x = random_tensor(xs, dt, 301, -1, 1), w = random_tensor(ws, dt, 302, -1, 1);
    Tensor b = cc.bias ? random_tensor({g.o}, dt, 303, -1, 1) : Tensor();
    Tensor dy = random_tensor(ys, dt, 304, -1, 1);
    Tensor gb = cc.bias ? b.to(dev()) : Tensor();

    Tensor y = Tensor::empty(ys, dt), gy = Tensor::empty(ys, dt, dev());
    kernels::conv2d_forward(kCPU)(x, w, b, y, g);
    kernels::conv2d_forward(dev())(x.to(dev()), w.to(dev()), gb, gy, g);
    expect_close(gy, y, rtol(dt), what + " y");

    Tensor dx = Tensor::empty(xs, dt), gdx = Tensor::empty(xs, dt, dev());
    kernels::conv2d_backward_input(kCPU)(dy, w, dx, g);
    kernels::conv2d_backward_input(dev())(dy.to(dev()), w.to(dev()), gdx, g);
    expect_close(gdx, dx, rtol(dt), what + " dx");

    Tensor dw = Tensor::empty(ws, dt), gdw = Tensor::empty(ws, dt, dev());
    Tensor db = cc.bias ? Tensor::empty({g.o}, dt) : Tensor();
    Tensor gdb = cc.bias ? Tensor::empty({g.o}, dt, dev()) : Tensor();
    kernels::conv2d_backward_weight(kCPU)(x, dy, dw, db, g);
    kernels::conv2d_backward_weight(dev())(x.to(dev()), dy.to(dev()), gdw, gdb, g);
    expect_close(gdw, dw, rtol(dt), what + " dw");
    if (cc.bias) expect_close(gdb, db, rtol(dt), what + " db");
  }
}

std::string conv_param_name(const ::testing::TestParamInfo<ConvParam>& info) {
  return std::string(std::get<0>(info.param) == DeviceKind::SIM ? "Sim" : "Cuda") + "_" + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvOps,
                         ::testing::Combine(::testing::Values(DeviceKind::SIM, DeviceKind::CUDA),
                                            ::testing::ValuesIn(kCases)),
                         conv_param_name);

using ScopedEnv = env::ScopedValue;  // sets an environment variable for one scope

// On a GPU: cuDNN and TANDEM_CONV=im2col agree, a repeated (cached-plan) call gives the same bits,
// and a wrong TANDEM_CONV is reported.
TEST(CudnnConv, Im2colSwitchAgreesAndPlansAreDeterministic) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "cuDNN conv not tested: " << cuda::describe();
  const Device d(DeviceKind::CUDA, 0);
  const kernels::Conv2dGeometry g = kCases[1].geometry();
  const Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.kh, g.kw}, ys{g.n, g.o, g.ho, g.wo};
  Tensor x = random_tensor(xs, DType::f32, 311, -1, 1).to(d), w = random_tensor(ws, DType::f32, 312, -1, 1).to(d);
  Tensor b = random_tensor({g.o}, DType::f32, 313, -1, 1).to(d), dy = random_tensor(ys, DType::f32, 314, -1, 1).to(d);
  auto run = [&] {
    Tensor y = Tensor::empty(ys, DType::f32, d), dx = Tensor::empty(xs, DType::f32, d);
    Tensor dw = Tensor::empty(ws, DType::f32, d), db = Tensor::empty({g.o}, DType::f32, d);
    kernels::conv2d_forward(d)(x, w, b, y, g);
    kernels::conv2d_backward_input(d)(dy, w, dx, g);
    kernels::conv2d_backward_weight(d)(x, dy, dw, db, g);
    return std::vector<Tensor>{y.to(kCPU), dx.to(kCPU), dw.to(kCPU), db.to(kCPU)};
  };
  std::vector<Tensor> first = run(), again = run(), im2col;
  {
    ScopedEnv env("TANDEM_CONV", "im2col");
    im2col = run();
  }
  const char* names[] = {"y", "dx", "dw", "db"};
  for (size_t i = 0; i < first.size(); ++i) {
    expect_close(again[i], first[i], 0, std::string("repeat ") + names[i]);
    expect_close(im2col[i], first[i], 1e-4, std::string("im2col vs cudnn ") + names[i]);
  }
  ScopedEnv bad("TANDEM_CONV", "winograd");
  Tensor y = Tensor::empty(ys, DType::f32, d);
  EXPECT_THROW(kernels::conv2d_forward(d)(x, w, b, y, g), ValueError);
}

kernels::Conv2dGeometry conv_geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t s,
                                      int64_t p) {
  kernels::Conv2dGeometry g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.o = o, g.kh = k, g.kw = k, g.sh = s, g.sw = s, g.ph = p, g.pw = p;
  g.ho = (h + 2 * p - k) / s + 1;
  g.wo = (w + 2 * p - k) / s + 1;
  return g;
}

class ConvBackendOps : public BackendTest {};

TEST_P(ConvBackendOps, Im2colCol2imMatchCpuExactly) {
  for (auto g : {conv_geometry(2, 3, 6, 7, 4, 3, 1, 1), conv_geometry(1, 2, 9, 8, 3, 3, 2, 0), conv_geometry(1, 1, 1, 1, 1, 1, 1, 0),
                 conv_geometry(2, 2, 5, 5, 2, 2, 2, 1)}) {
    Tensor x = random_tensor({g.n, g.c, g.h, g.w}, DType::f32, 131);
    Tensor cols = Tensor::empty({g.k(), g.n * g.l()}), dcols = Tensor::empty({g.k(), g.n * g.l()}, DType::f32, dev());
    Tensor dx = x.to(dev());
    kernels::im2col(kCPU)(kCPU, DType::f32, g, x.data_ptr(), cols.data_ptr());
    kernels::im2col(dev())(dev(), DType::f32, g, dx.data_ptr(), dcols.data_ptr());
    expect_close(dcols, cols, 0, "im2col");
    Tensor back = Tensor::empty(x.shape()), dback = Tensor::empty(x.shape(), DType::f32, dev());
    kernels::col2im(kCPU)(kCPU, DType::f32, g, cols.data_ptr(), back.data_ptr());
    kernels::col2im(dev())(dev(), DType::f32, g, dcols.data_ptr(), dback.data_ptr());
    expect_close(dback, back, 0, "col2im");
  }
}

TEST_P(ConvBackendOps, Conv2dForwardBackwardMatchCpu) {
  for (DType dt : {DType::f32, DType::f64, DType::f16})
    for (auto g : {conv_geometry(2, 3, 6, 7, 4, 3, 1, 1), conv_geometry(3, 2, 9, 8, 5, 3, 2, 0), conv_geometry(1, 1, 1, 1, 1, 1, 1, 0),
                   conv_geometry(0, 2, 4, 4, 3, 3, 1, 1)}) {
      const double rtol = dt == DType::f16 ? 2e-3 : 1e-5;
      std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(g.n) + " c=" + std::to_string(g.c);
      Shape xs{g.n, g.c, g.h, g.w}, ws{g.o, g.c, g.kh, g.kw}, ys{g.n, g.o, g.ho, g.wo};
      Tensor x = random_tensor(xs, dt, 141), w = random_tensor(ws, dt, 142), b = random_tensor({g.o}, dt, 143);
      Tensor dy = random_tensor(ys, dt, 144);
      Tensor y = Tensor::empty(ys, dt), gy = Tensor::empty(ys, dt, dev());
      kernels::conv2d_forward(kCPU)(x, w, b, y, g);
      kernels::conv2d_forward(dev())(x.to(dev()), w.to(dev()), b.to(dev()), gy, g);
      expect_close(gy, y, rtol, what + " y");
      Tensor dx = Tensor::empty(xs, dt), gdx = Tensor::empty(xs, dt, dev());
      kernels::conv2d_backward_input(kCPU)(dy, w, dx, g);
      kernels::conv2d_backward_input(dev())(dy.to(dev()), w.to(dev()), gdx, g);
      expect_close(gdx, dx, rtol, what + " dx");
      Tensor dw = Tensor::empty(ws, dt), db = Tensor::empty({g.o}, dt);
      Tensor gdw = Tensor::empty(ws, dt, dev()), gdb = Tensor::empty({g.o}, dt, dev());
      kernels::conv2d_backward_weight(kCPU)(x, dy, dw, db, g);
      kernels::conv2d_backward_weight(dev())(x.to(dev()), dy.to(dev()), gdw, gdb, g);
      expect_close(gdw, dw, rtol, what + " dw");
      expect_close(gdb, db, rtol, what + " db");
    }
}

TANDEM_BACKEND_SUITE(ConvBackendOps);

}  // namespace
}  // namespace tandem::testing
