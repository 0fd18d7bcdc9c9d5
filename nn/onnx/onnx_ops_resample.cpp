// The ONNX ops that change a feature map's size, as U-Nets export them: ConvTranspose
// (nn.ConvTranspose2d) on ops::conv_transpose2d, and Resize (nn.Upsample, F.interpolate) as one
// interpolation matrix per resized axis applied with matmul, so that both backends and autograd have it
// with no kernel of its own: exact for nearest (one 1 per row), the products rounded once for linear.
#include <algorithm>
#include <array>
#include <cmath>

#include "nn/onnx/onnx_op_parts.h"
#include "runtime/error.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/matmul.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::onnx::detail {

// ---- ConvTranspose ----

namespace {

// kernel_shape, strides, output_padding or dilations: two entries (2-D windows), `otherwise` when absent.
std::array<int64_t, 2> two_ints(const OpCall& c, const char* name, std::array<int64_t, 2> otherwise) {
  const std::vector<int64_t> v = c.attr_ints(name, {otherwise[0], otherwise[1]});
  if (v.size() != 2) c.fail(fmt::format("{} has {} entries; tandem runs 2-D transposed convolutions", name, v.size()));
  return {v[0], v[1]};
}

// The symmetric padding of a ConvTranspose: from pads, from auto_pad VALID, or worked out from
// output_shape with the spec's rule (total = stride * (in - 1) + output_padding + kernel - output_shape,
// split start/end); only an even total (the same padding on both sides) runs.
std::array<int64_t, 2> transpose_pads(const OpCall& c, const Shape& x, std::array<int64_t, 2> k,
                                      std::array<int64_t, 2> s, std::array<int64_t, 2> out_pad) {
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    c.fail("auto_pad " + auto_pad + " is not supported (NOTSET with pads, or VALID)");
  const std::vector<int64_t> shape = c.attr_ints("output_shape");
  if (!shape.empty()) {
    if (shape.size() != 2) c.fail(fmt::format("output_shape has {} entries; give the 2 spatial sizes", shape.size()));
    std::array<int64_t, 2> p{};
    for (int a = 0; a < 2; ++a) {
      const int64_t total = s[a] * (x[2 + a] - 1) + out_pad[a] + k[a] - shape[a];
      if (total < 0 || total % 2 != 0)
        c.fail(fmt::format("output_shape [{}] needs a total padding of {} on axis {}: only an even, non-negative "
                           "one (the same on both sides) is supported", fmt::join(shape, ", "), total, 2 + a));
      p[a] = total / 2;
    }
    return p;
  }
  if (auto_pad == "VALID") return {0, 0};
  const std::vector<int64_t> p = c.attr_ints("pads", {0, 0, 0, 0});
  if (p.size() != 4) c.fail(fmt::format("pads has {} entries; tandem runs 2-D windows (4 pads)", p.size()));
  if (p[0] != p[2] || p[1] != p[3]) c.fail(fmt::format("pads [{}] are not symmetric", fmt::join(p, ", ")));
  if (p[0] < 0 || p[1] < 0) c.fail(fmt::format("pads [{}] are negative", fmt::join(p, ", ")));
  return {p[0], p[1]};
}

}  // namespace

// x [N, C, H, W], W [C, O / group, kh, kw], B [O]. A grouped one runs one conv_transpose2d per group
// on its slice of the channels, concatenated (as Conv does).
std::vector<Value> op_conv_transpose(const OpCall& c) {
  const Tensor x = c.tensor(0), w = c.tensor(1);
  const Tensor b = c.has_input(2) ? c.tensor(2) : Tensor();
  if (x.dim() != 4 || w.dim() != 4)
    c.fail(fmt::format("input of rank {}: tandem runs 2-D transposed convolutions", x.dim()));
  const std::array<int64_t, 2> d = two_ints(c, "dilations", {1, 1});
  if (d[0] != 1 || d[1] != 1) c.fail(fmt::format("dilations [{}, {}] are not supported (1 only)", d[0], d[1]));
  const std::array<int64_t, 2> k = two_ints(c, "kernel_shape", {w.size(2), w.size(3)});
  if (k[0] != w.size(2) || k[1] != w.size(3))
    c.fail(fmt::format("kernel_shape [{}, {}] differs from the weight {}", k[0], k[1], shape_str(w.shape())));
  const std::array<int64_t, 2> s = two_ints(c, "strides", {1, 1}), op = two_ints(c, "output_padding", {0, 0});
  for (int a = 0; a < 2; ++a) {
    if (s[a] < 1) c.fail(fmt::format("strides [{}, {}] must be >= 1", s[0], s[1]));
    if (op[a] < 0 || op[a] >= s[a])
      c.fail(fmt::format("output_padding [{}, {}] must be >= 0 and smaller than the strides [{}, {}]", op[0], op[1],
                         s[0], s[1]));
  }
  const std::array<int64_t, 2> p = transpose_pads(c, x.shape(), k, s, op);
  const int64_t group = c.attr_int("group", 1);
  if (group == 1) return one(ops::conv_transpose2d(x, w, b, s, p, op));
  if (group < 1 || x.size(1) % group != 0 || w.size(0) != x.size(1))
    c.fail(fmt::format("group {} does not divide input {} and weight {}", group, shape_str(x.shape()),
                       shape_str(w.shape())));
  const int64_t in = x.size(1) / group, out = w.size(1);
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < group; ++g)
    parts.push_back(ops::conv_transpose2d(ops::narrow(x, 1, g * in, in), ops::narrow(w, 0, g * in, in),
                                          b.defined() ? ops::narrow(b, 0, g * out, out) : Tensor(), s, p, op));
  return one(ops::concat(parts, 1));
}

// ---- Resize ----

// Where output index i of an axis resized from `in` to `out` (with `scale`, out / in unless the node
// gave scales) samples the input, by ONNX's coordinate_transformation_mode.
static double source_coordinate(const ResizeRule& r, int64_t i, int64_t in, int64_t out, double scale) {
  const double x = static_cast<double>(i);
  switch (r.coord) {
    case ResizeCoord::HalfPixel: return (x + 0.5) / scale - 0.5;
    case ResizeCoord::PytorchHalfPixel: return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::AlignCorners:
      return out > 1 ? x * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    case ResizeCoord::Asymmetric: return x / scale;
  }
  return 0.0;
}

// nearest_mode: the input index nearest to coordinate x, ties as the mode says.
static int64_t nearest_index(ResizeNearest mode, double x) {
  const double fl = std::floor(x);
  switch (mode) {
    case ResizeNearest::Floor: return static_cast<int64_t>(fl);
    case ResizeNearest::Ceil: return static_cast<int64_t>(std::ceil(x));
    case ResizeNearest::RoundPreferFloor: return static_cast<int64_t>(x - fl == 0.5 ? fl : std::round(x));
    case ResizeNearest::RoundPreferCeil: return static_cast<int64_t>(x - fl == 0.5 ? fl + 1 : std::round(x));
  }
  return 0;
}

std::vector<double> resize_matrix(const ResizeRule& r, int64_t in, int64_t out, double scale) {
  std::vector<double> m(static_cast<size_t>(in * out), 0.0);
  auto at = [&](int64_t src, int64_t dst) -> double& { return m[static_cast<size_t>(src * out + dst)]; };
  for (int64_t i = 0; i < out; ++i) {
    const double x = source_coordinate(r, i, in, out, scale);
    if (r.linear) {
      // Outside [0, in - 1] the edge value repeats (onnxruntime and PyTorch clamp the coordinate).
      const double xc = std::clamp(x, 0.0, static_cast<double>(in - 1));
      const int64_t lo = static_cast<int64_t>(std::floor(xc)), hi = std::min(lo + 1, in - 1);
      const double t = xc - static_cast<double>(lo);
      at(lo, i) += 1.0 - t;
      at(hi, i) += t;
    } else {
      at(std::clamp<int64_t>(nearest_index(r.nearest, x), 0, in - 1), i) = 1.0;
    }
  }
  return m;
}

// The product of x's last axis with a [in, out] matrix: [..., in] -> [..., out].
static Tensor along_last(const Tensor& x, const std::vector<double>& m, int64_t in, int64_t out) {
  const Tensor a = Tensor::from_vector(m, {in, out}, x.dtype()).to(x.device());
  Shape s = x.shape();
  const int64_t rows = x.numel() / in;
  s.back() = out;
  return ops::reshape(ops::matmul(ops::reshape(x, {rows, in}), a), s);
}

Tensor resize_spatial(const Tensor& x, const ResizeRule& r, const std::vector<int64_t>& out,
                      const std::vector<double>& scales) {
  Tensor y = x;
  const int64_t rank = x.dim();
  // The last axis in place; the one before it (H of [N, C, H, W]) swapped to the end and back.
  for (int64_t a = rank - 1; a >= 2; --a) {
    const size_t i = static_cast<size_t>(a);
    const int64_t in = x.size(a);
    if (out[i] == in && scales[i] == 1.0) continue;  // identity under every mode
    const std::vector<double> m = resize_matrix(r, in, out[i], scales[i]);
    if (a == rank - 1) {
      y = along_last(y, m, in, out[i]);
    } else {
      y = ops::transpose(along_last(ops::transpose(y, a, rank - 1), m, in, out[i]), a, rank - 1);
    }
  }
  return y;
}

namespace {

ResizeRule resize_rule(const OpCall& c) {
  ResizeRule r;
  const std::string mode = c.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    c.fail(fmt::format("mode {} is not supported (nearest or linear)", mode));
  r.linear = mode == "linear";
  const std::string coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") r.coord = ResizeCoord::HalfPixel;
  else if (coord == "pytorch_half_pixel") r.coord = ResizeCoord::PytorchHalfPixel;
  else if (coord == "align_corners") r.coord = ResizeCoord::AlignCorners;
  else if (coord == "asymmetric") r.coord = ResizeCoord::Asymmetric;
  else c.fail(fmt::format("coordinate_transformation_mode {} is not supported (half_pixel, pytorch_half_pixel, "
                          "align_corners or asymmetric)", coord));
  const std::string nearest = c.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") r.nearest = ResizeNearest::RoundPreferFloor;
  else if (nearest == "round_prefer_ceil") r.nearest = ResizeNearest::RoundPreferCeil;
  else if (nearest == "floor") r.nearest = ResizeNearest::Floor;
  else if (nearest == "ceil") r.nearest = ResizeNearest::Ceil;
  else c.fail(fmt::format("nearest_mode {} is not supported", nearest));
  // Opset 18's additions change the result; refused rather than ignored.
  if (c.attr_int("antialias", 0) != 0) c.fail("antialias 1 is not supported");
  if (!c.attr_ints("axes").empty()) c.fail("axes is not supported (give scales or sizes for every axis)");
  if (c.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    c.fail("keep_aspect_ratio_policy other than stretch is not supported");
  return r;
}

}  // namespace

// Resize (opset 11+): inputs X, roi (read only by tf_crop_and_resize: ignored), scales, sizes (one of
// them, an empty scales meaning absent). Output size floor(in * scale) from scales, the coordinate
// scale out / in from sizes. Only the axes after N and C are resized: [N, C, W] or [N, C, H, W].
std::vector<Value> op_resize(const OpCall& c) {
  const Tensor x = c.tensor(0);
  const ResizeRule r = resize_rule(c);
  const int64_t rank = x.dim();
  if (rank != 3 && rank != 4)
    c.fail(fmt::format("input {}: tandem resizes [N, C, W] or [N, C, H, W]", shape_str(x.shape())));
  std::vector<double> scales;
  if (c.has_input(2) && c.input(2).dims() != Shape{0}) scales = c.tensor(2).to(kCPU).to_vector<double>();
  std::vector<int64_t> sizes;
  if (c.has_input(3)) sizes = c.input(3).integers();
  if (scales.empty() == sizes.empty()) c.fail("give exactly one of scales and sizes");
  const size_t n = static_cast<size_t>(rank);
  if ((!scales.empty() && scales.size() != n) || (!sizes.empty() && sizes.size() != n))
    c.fail(fmt::format("scales/sizes have {} entries for an input of rank {}", std::max(scales.size(), sizes.size()),
                       rank));
  std::vector<int64_t> out(n);
  if (sizes.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (!(scales[i] > 0)) c.fail(fmt::format("scales [{}] must be positive", fmt::join(scales, ", ")));
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.size(static_cast<int64_t>(i))) * scales[i]));
    }
  } else {
    out = sizes;
    scales.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (sizes[i] < 1) c.fail(fmt::format("sizes [{}] must be >= 1", fmt::join(sizes, ", ")));
      scales[i] = static_cast<double>(sizes[i]) / static_cast<double>(x.size(static_cast<int64_t>(i)));
    }
  }
  for (int64_t a = 0; a < 2; ++a)
    if (out[static_cast<size_t>(a)] != x.size(a) || scales[static_cast<size_t>(a)] != 1.0)
      c.fail(fmt::format("scales [{}] / sizes [{}] of input {}: the N and C axes must keep their size (scale 1)",
                         fmt::join(scales, ", "), fmt::join(out, ", "), shape_str(x.shape())));
  for (size_t i = 2; i < n; ++i)
    if (out[i] < 1) c.fail(fmt::format("scales [{}] leave axis {} empty", fmt::join(scales, ", "), i));
  return one(resize_spatial(x, r, out, scales));
}

}  // namespace tandem::nn::onnx::detail
