// The resampling ops of nn/onnx/onnx_ops_resample.cpp: Resize's interpolation matrices against PyTorch's
// F.interpolate in the ONNX modes torch.onnx exports it as, values and gradients; a gradcheck; the modes
// PyTorch does not export, checked by hand; a grouped ConvTranspose node against PyTorch; what the two ops
// refuse, named (tests/cuda/test_ops_resample.cpp runs them under the CUDA emulator).
#include <gtest/gtest.h>

#include "nn/onnx/onnx_op_parts.h"
#include "tests/onnx/node_run.h"
#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "tests/reference/ops_resample_values.h"
#include "tests/support/gradcheck.h"

using namespace tandem;
using tandem::testing::error_of;
using tandem::testing::NodeRun;
using tandem::nn::onnx::detail::resize_matrix;
using tandem::nn::onnx::detail::resize_spatial;
using tandem::nn::onnx::detail::ResizeCoord;
using tandem::nn::onnx::detail::ResizeNearest;
using tandem::nn::onnx::detail::ResizeRule;
namespace r = tandem::ref::ops_resample;

namespace {

ResizeRule rule(bool linear, ResizeCoord coord, ResizeNearest nearest = ResizeNearest::Floor) {
  ResizeRule rr;
  rr.linear = linear;
  rr.coord = coord;
  rr.nearest = nearest;
  return rr;
}

struct Case {
  const char* name;
  ResizeRule rule;
  std::vector<int64_t> out;   // [N, C, H, W]
  std::vector<double> scales;  // the node's scales, or out / in from sizes
  const std::vector<double>& y;
  const std::vector<double>& r;
  const std::vector<double>& gx;
};

// The ONNX node torch.onnx writes for each F.interpolate of make_ops_resample.py.
std::vector<Case> cases() {
  const ResizeRule nearest = rule(false, ResizeCoord::Asymmetric), half = rule(true, ResizeCoord::HalfPixel),
                   corners = rule(true, ResizeCoord::AlignCorners);
  const std::vector<double> by2{1, 1, 2, 2}, sized{1, 1, 7.0 / 4.0, 3.0 / 5.0};
  return {{"nearest2", nearest, {2, 2, 8, 10}, by2, r::rs_nearest2_y, r::rs_nearest2_r, r::rs_nearest2_gx},
          {"nearest_size", nearest, {2, 2, 7, 3}, sized, r::rs_nearest_size_y, r::rs_nearest_size_r,
           r::rs_nearest_size_gx},
          {"bilinear2", half, {2, 2, 8, 10}, by2, r::rs_bilinear2_y, r::rs_bilinear2_r, r::rs_bilinear2_gx},
          {"bilinear_size", half, {2, 2, 7, 3}, sized, r::rs_bilinear_size_y, r::rs_bilinear_size_r,
           r::rs_bilinear_size_gx},
          {"corners2", corners, {2, 2, 8, 10}, by2, r::rs_corners2_y, r::rs_corners2_r, r::rs_corners2_gx}};
}

}  // namespace

TEST(OnnxResize, MatchesInterpolateValuesAndGradients) {
  for (const Case& c : cases()) {
    for (DType dt : {DType::f64, DType::f32}) {
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      Tensor x = Tensor::from_vector(r::rs_x, {2, 2, 4, 5}, dt);
      x.set_requires_grad(true);
      Tensor y = resize_spatial(x, c.rule, c.out, c.scales);
      ASSERT_EQ(y.shape(), Shape(c.out.begin(), c.out.end())) << c.name;
      tandem::testing::expect_close(y, c.y, tol, tol);
      Tensor g = grad({y}, {x}, {Tensor::from_vector(c.r, y.shape(), dt)})[0];
      tandem::testing::expect_close(g, c.gx, tol, tol);
    }
  }
}

TEST(OnnxResize, LinearOnOneAxisMatchesInterpolate) {
  Tensor x = Tensor::from_vector(r::rs_x1, {2, 3, 5}, DType::f64);
  x.set_requires_grad(true);
  Tensor y = resize_spatial(x, rule(true, ResizeCoord::HalfPixel), {2, 3, 10}, {1, 1, 2});
  tandem::testing::expect_close(y, r::rs_linear1d_y, 1e-12, 1e-12);
  const Tensor gx = grad({y}, {x}, {Tensor::from_vector(r::rs_linear1d_r, y.shape())})[0];
  tandem::testing::expect_close(gx, r::rs_linear1d_gx, 1e-12, 1e-12);
}

TEST(OnnxResize, Gradcheck) {
  for (const ResizeRule& rr : {rule(true, ResizeCoord::HalfPixel), rule(false, ResizeCoord::HalfPixel,
                                                                         ResizeNearest::RoundPreferCeil)}) {
    tandem::testing::expect_gradcheck([&](const std::vector<Tensor>& t) {
      return resize_spatial(t[0], rr, {1, 2, 5, 2}, {1, 1, 5.0 / 3.0, 0.5});
    }, {tandem::testing::random_leaf({1, 2, 3, 4}, 31)});
  }
}

// Column j of the [in, out] matrix: output j's weight on each input.
std::vector<double> column(const std::vector<double>& m, int64_t in, int64_t out, int64_t j) {
  std::vector<double> c;
  for (int64_t i = 0; i < in; ++i) c.push_back(m[static_cast<size_t>(i * out + j)]);
  return c;
}

TEST(OnnxResize, ModesPyTorchDoesNotExportFollowTheSpec) {
  using V = std::vector<double>;
  // 2 -> 4 by half_pixel: output 1 samples x = 1.5 / 2 - 0.5 = 0.25; round_prefer_floor/ceil break the
  // tie of 2 -> 1 (x = 0.5 / 0.5 - 0.5 = 0.5) each its way.
  const V lin = resize_matrix(rule(true, ResizeCoord::HalfPixel), 2, 4, 2.0);
  EXPECT_EQ(column(lin, 2, 4, 1), (V{0.75, 0.25}));
  EXPECT_EQ(column(lin, 2, 4, 0), (V{1.0, 0.0}));  // x = -0.25 clamps to the edge
  EXPECT_EQ(resize_matrix(rule(false, ResizeCoord::HalfPixel, ResizeNearest::RoundPreferFloor), 2, 1, 0.5), (V{1, 0}));
  EXPECT_EQ(resize_matrix(rule(false, ResizeCoord::HalfPixel, ResizeNearest::RoundPreferCeil), 2, 1, 0.5), (V{0, 1}));
  EXPECT_EQ(resize_matrix(rule(false, ResizeCoord::Asymmetric, ResizeNearest::Ceil), 4, 2, 0.5),
            (V{1, 0, 0, 0, 0, 1, 0, 0}));
  // pytorch_half_pixel: one output samples input 0 (half_pixel would sample the middle).
  EXPECT_EQ(resize_matrix(rule(true, ResizeCoord::PytorchHalfPixel), 4, 1, 0.25), (V{1, 0, 0, 0}));
  EXPECT_EQ(resize_matrix(rule(true, ResizeCoord::HalfPixel), 4, 1, 0.25), (V{0, 0.5, 0.5, 0}));
  // align_corners 3 -> 5: x = j * 2 / 4.
  EXPECT_EQ(column(resize_matrix(rule(true, ResizeCoord::AlignCorners), 3, 5, 5.0 / 3.0), 3, 5, 3), (V{0, 0.5, 0.5}));
  // asymmetric linear 2 -> 4: x = j / 2, the last output beyond the edge clamps.
  const V asym = resize_matrix(rule(true, ResizeCoord::Asymmetric), 2, 4, 2.0);
  EXPECT_EQ(column(asym, 2, 4, 1), (V{0.5, 0.5}));
  EXPECT_EQ(column(asym, 2, 4, 3), (V{0.0, 1.0}));
}


TEST(OnnxConvTranspose, GroupedNodeMatchesPyTorch) {
  NodeRun n("ConvTranspose", {nn::onnx::Value::of(Tensor::from_vector(r::ct3_x, {1, 4, 3, 3})),
                              nn::onnx::Value::of(Tensor::from_vector(r::ct3_w, {4, 3, 2, 2})),
                              nn::onnx::Value::of(Tensor::from_vector(r::ct3_b, {6}))});
  n.integer("group", 2);
  n.ints("strides", {2, 2});
  n.ints("kernel_shape", {2, 2});
  const Tensor y = n.run(nn::onnx::detail::op_conv_transpose);
  ASSERT_EQ(y.shape(), (Shape{1, 6, 6, 6}));
  tandem::testing::expect_close(y, r::ct3_y, 1e-12, 1e-12);
}

TEST(OnnxConvTranspose, RefusalsNameNodeAndAttribute) {
  NodeRun n("ConvTranspose",
            {nn::onnx::Value::of(Tensor::zeros({1, 2, 3, 3})), nn::onnx::Value::of(Tensor::zeros({2, 2, 3, 3}))});
  n.ints("dilations", {2, 2});
  const std::string m = error_of(n, nn::onnx::detail::op_conv_transpose);
  EXPECT_NE(m.find("node.onnx: node 'n' (ConvTranspose, opset 13): dilations [2, 2] are not supported"),
            std::string::npos) << m;
  n.ints("dilations", {1, 1});
  n.ints("output_shape", {6, 6});  // (3 - 1) + 3 - 6 = -1: no padding gives it
  EXPECT_NE(error_of(n, nn::onnx::detail::op_conv_transpose).find("output_shape [6, 6]"), std::string::npos);
  n.ints("output_shape", {3, 3});  // total padding 2: 1 on each side
  EXPECT_EQ(n.run(nn::onnx::detail::op_conv_transpose).shape(), (Shape{1, 2, 3, 3}));
}

TEST(OnnxResizeNode, ScalesOnBatchOrChannelsAreRefused) {
  const Tensor x = Tensor::zeros({1, 2, 3, 3});
  NodeRun n("Resize", {nn::onnx::Value::of(x), nn::onnx::Value(),
                       nn::onnx::Value::of(Tensor::from_vector(std::vector<double>{1, 2, 2, 2}, {4}, DType::f32))});
  const std::string m = error_of(n, nn::onnx::detail::op_resize);
  EXPECT_NE(m.find("node 'n' (Resize, opset 13): scales [1, 2, 2, 2]"), std::string::npos) << m;
  EXPECT_NE(m.find("the N and C axes must keep their size"), std::string::npos) << m;
  nn::onnx::Attribute& mode = n.node.attributes["coordinate_transformation_mode"];
  mode.kind = nn::onnx::Attribute::Kind::String;
  mode.s = "tf_crop_and_resize";
  EXPECT_NE(error_of(n, nn::onnx::detail::op_resize)
                .find("coordinate_transformation_mode tf_crop_and_resize is not supported"),
            std::string::npos);
}
