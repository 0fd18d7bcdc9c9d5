// conv2d entry: validate, call the backend's whole-op conv tables, record a backward closure that
// keeps x only when dW is needed and w only when dX is needed. conv_transpose2d runs on the same three
// tables with the roles turned round (no kernels of its own, so every backend has it).
#include "runtime/ops/conv.h"

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/conv.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/shape.h"

namespace tandem::ops {

namespace {

// Both convolutions' operands after autocast, checked alike: x [N, C, H, W] and a 4-D weight
// (`layout` names its dims in the message), floating, one dtype and device.
struct ConvOperands {
  Tensor x, w, b;
};
ConvOperands conv_operands(const char* op, const char* layout, const Tensor& x_in, const Tensor& w_in,
                           const Tensor& b_in) {
  detail::check_defined(x_in, op, "input");
  detail::check_defined(w_in, op, "weight");
  ConvOperands o{autocast_arg(x_in, AutocastCategory::LowPrecision), autocast_arg(w_in, AutocastCategory::LowPrecision),
                 b_in.defined() ? autocast_arg(b_in, AutocastCategory::LowPrecision) : b_in};
  TANDEM_CHECK(o.x.dim() == 4, "{}: input must be [N, C, H, W], got {}", op, detail::describe(o.x));
  TANDEM_CHECK(o.w.dim() == 4, "{}: weight must be {}, got {}", op, layout, detail::describe(o.w));
  detail::check_floating(op, o.x);
  detail::check_compatible(op, o.x, o.w);
  return o;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, std::array<int64_t, 2> stride,
              std::array<int64_t, 2> padding) {
  using detail::describe;
  const auto [x, w, b] = conv_operands("conv2d", "[O, C, kh, kw]", x_in, w_in, b_in);
  TANDEM_CHECK(x.size(1) == w.size(1),
               "conv2d: input {} has {} channels but weight {} expects {} (weight is [O, C, kh, kw])",
               shape_str(x.shape()), x.size(1), shape_str(w.shape()), w.size(1));
  TANDEM_CHECK(stride[0] >= 1 && stride[1] >= 1, "conv2d: stride must be >= 1, got [{}, {}]", stride[0], stride[1]);
  TANDEM_CHECK(padding[0] >= 0 && padding[1] >= 0, "conv2d: padding must be >= 0, got [{}, {}]", padding[0],
               padding[1]);
  if (b.defined()) {
    detail::check_compatible("conv2d", x, b);
    TANDEM_CHECK(b.dim() == 1 && b.size(0) == w.size(0), "conv2d: bias must be [{}] for weight {}, got {}",
                 w.size(0), shape_str(w.shape()), describe(b));
  }

  kernels::Conv2dGeometry g;
  g.n = x.size(0); g.c = x.size(1); g.h = x.size(2); g.w = x.size(3);
  g.o = w.size(0); g.kh = w.size(2); g.kw = w.size(3);
  g.sh = stride[0]; g.sw = stride[1]; g.ph = padding[0]; g.pw = padding[1];
  const int64_t hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
  TANDEM_CHECK(g.kh <= hp && g.kw <= wp,
               "conv2d: kernel {}x{} (weight {}) is larger than the padded input {}x{} (input {}, padding [{}, {}])",
               g.kh, g.kw, shape_str(w.shape()), hp, wp, shape_str(x.shape()), g.ph, g.pw);
  g.ho = (hp - g.kh) / g.sh + 1;
  g.wo = (wp - g.kw) / g.sw + 1;

  Tensor y = Tensor::empty({g.n, g.o, g.ho, g.wo}, x.dtype(), x.device());
  kernels::conv2d_forward(x.device())(x, w, b, y, g);
  if (!needs_grad({&x, &w, &b})) return y;

  const bool gx = x.requires_grad(), gw = w.requires_grad(), gb = b.defined() && b.requires_grad();
  Tensor x_saved = (gw || gb) ? x.detach() : Tensor();  // dW, db read x (db only through the shared call)
  Tensor w_saved = gx ? w.detach() : Tensor();
  const Shape w_shape = w.shape();
  const Shape b_shape = b.defined() ? b.shape() : Shape{};
  return record("Conv2dBackward", {x, w, b}, y, [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];  // [N, O, Ho, Wo]
    Tensor dx, dw, db;
    if (gx) {
      dx = Tensor::empty({g.n, g.c, g.h, g.w}, dy.dtype(), dy.device());
      kernels::conv2d_backward_input(dy.device())(dy, w_saved, dx, g);
    }
    if (gw || gb) {
      dw = Tensor::empty(w_shape, dy.dtype(), dy.device());
      if (gb) db = Tensor::empty(b_shape, dy.dtype(), dy.device());
      kernels::conv2d_backward_weight(dy.device())(x_saved, dy, dw, db, g);
    }
    return {dx, gw ? dw : Tensor(), db};
  });
}

// The transposed convolution is conv2d's input gradient: with the geometry of the conv2d that maps
// y [N, O, Ho, Wo] (its "input") to x [N, C, H, W] (its "output", C its channels), and the weight
// [C, O, kh, kw] (conv2d's [o, c, kh, kw] layout exactly),
//   y  = conv2d_backward_input(x, w)          (forward)
//   dx = conv2d_forward(dy, w)                (the adjoint of the adjoint)
//   dw = conv2d_backward_weight(dy, x)        (conv2d's dW with its input dy and its output gradient x)
// The conv2d geometry floors (Ho + 2p - kh) / s + 1 = H exactly when output_padding < stride: the
// output_padding rows at the bottom/right get no tap but the bias, as in PyTorch.
Tensor conv_transpose2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, std::array<int64_t, 2> stride,
                        std::array<int64_t, 2> padding, std::array<int64_t, 2> output_padding) {
  using detail::describe;
  const auto [x, w, b] = conv_operands("conv_transpose2d", "[C, O, kh, kw]", x_in, w_in, b_in);
  TANDEM_CHECK(x.size(1) == w.size(0),
               "conv_transpose2d: input {} has {} channels but weight {} expects {} (weight is [C, O, kh, kw])",
               shape_str(x.shape()), x.size(1), shape_str(w.shape()), w.size(0));
  for (int a = 0; a < 2; ++a) {
    TANDEM_CHECK(stride[a] >= 1, "conv_transpose2d: stride must be >= 1, got [{}, {}]", stride[0], stride[1]);
    TANDEM_CHECK(padding[a] >= 0, "conv_transpose2d: padding must be >= 0, got [{}, {}]", padding[0], padding[1]);
    TANDEM_CHECK(output_padding[a] >= 0 && output_padding[a] < stride[a],
                 "conv_transpose2d: output_padding [{}, {}] must be >= 0 and smaller than the stride [{}, {}]",
                 output_padding[0], output_padding[1], stride[0], stride[1]);
  }
  if (b.defined()) {
    detail::check_compatible("conv_transpose2d", x, b);
    TANDEM_CHECK(b.dim() == 1 && b.size(0) == w.size(1), "conv_transpose2d: bias must be [{}] for weight {}, got {}",
                 w.size(1), shape_str(w.shape()), describe(b));
  }

  // The conv2d whose input gradient this is: its input is our output, its output our input.
  kernels::Conv2dGeometry g;
  g.n = x.size(0); g.o = x.size(1); g.ho = x.size(2); g.wo = x.size(3);
  g.c = w.size(1); g.kh = w.size(2); g.kw = w.size(3);
  g.sh = stride[0]; g.sw = stride[1]; g.ph = padding[0]; g.pw = padding[1];
  g.h = (g.ho - 1) * g.sh - 2 * g.ph + g.kh + output_padding[0];
  g.w = (g.wo - 1) * g.sw - 2 * g.pw + g.kw + output_padding[1];
  TANDEM_CHECK(g.ho >= 1 && g.wo >= 1 && g.h >= 1 && g.w >= 1,
               "conv_transpose2d: input {} with weight {}, stride [{}, {}], padding [{}, {}] and output_padding "
               "[{}, {}] gives an empty output {}x{}", shape_str(x.shape()), shape_str(w.shape()), g.sh, g.sw, g.ph,
               g.pw, output_padding[0], output_padding[1], g.h, g.w);

  Tensor y = Tensor::empty({g.n, g.c, g.h, g.w}, x.dtype(), x.device());  // [N, O, Ho, Wo]
  kernels::conv2d_backward_input(x.device())(x, w, y, g);
  if (needs_grad({&x, &w})) {
    const bool gx = x.requires_grad(), gw = w.requires_grad();
    Tensor x_saved = gw ? x.detach() : Tensor();  // dW reads x, dX reads w
    Tensor w_saved = gx ? w.detach() : Tensor();
    const Shape x_shape = x.shape(), w_shape = w.shape();
    y = record("ConvTranspose2dBackward", {x, w}, y, [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
      const Tensor& dy = grads[0];  // [N, O, Ho, Wo]
      Tensor dx, dw, none;
      if (gx) {
        dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
        kernels::conv2d_forward(dy.device())(dy, w_saved, none, dx, g);
      }
      if (gw) {
        dw = Tensor::empty(w_shape, dy.dtype(), dy.device());
        kernels::conv2d_backward_weight(dy.device())(dy, x_saved, dw, none, g);
      }
      return {dx, dw};
    });
  }
  // The bias through the broadcasting add: its gradient is dy summed over N, Ho and Wo.
  if (b.defined()) y = add(y, reshape(b, {1, g.c, 1, 1}));
  return y;
}

}  // namespace tandem::ops
