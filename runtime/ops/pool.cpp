// max_pool2d / avg_pool2d entries: validate, compute the geometry, call the backend's pooling tables,
// record backward (max keeps the i32 argmax, avg keeps only the geometry).
#include "runtime/autograd.h"
#include "runtime/backend/pool.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/pool.h"

namespace tandem::ops {
namespace detail {

kernels::Pool2dGeometry pool_geometry(const char* op, const Tensor& x, std::array<int64_t, 2> kernel,
                                      std::array<int64_t, 2> stride, std::array<int64_t, 2> padding) {
  detail::check_defined(x, op, "input");
  TANDEM_CHECK(x.dim() == 4, "{}: input must be [N, C, H, W], got {}", op, detail::describe(x));
  detail::check_floating(op, x);
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  TANDEM_CHECK(kernel[0] >= 1 && kernel[1] >= 1, "{}: kernel must be >= 1, got [{}, {}]", op, kernel[0], kernel[1]);
  TANDEM_CHECK(stride[0] >= 1 && stride[1] >= 1, "{}: stride must be >= 1 (0 for both: = kernel), got [{}, {}]",
               op, stride[0], stride[1]);
  TANDEM_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] * 2 <= kernel[0] && padding[1] * 2 <= kernel[1],
               "{}: padding [{}, {}] must be >= 0 and at most half of the kernel [{}, {}]", op, padding[0],
               padding[1], kernel[0], kernel[1]);
  kernels::Pool2dGeometry g;
  g.n = x.size(0); g.c = x.size(1); g.h = x.size(2); g.w = x.size(3);
  g.kh = kernel[0]; g.kw = kernel[1]; g.sh = stride[0]; g.sw = stride[1]; g.ph = padding[0]; g.pw = padding[1];
  const int64_t hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
  TANDEM_CHECK(g.kh <= hp && g.kw <= wp, "{}: kernel {}x{} is larger than the padded input {}x{} (input {})", op,
               g.kh, g.kw, hp, wp, shape_str(x.shape()));
  g.ho = (hp - g.kh) / g.sh + 1;
  g.wo = (wp - g.kw) / g.sw + 1;
  return g;
}

}  // namespace detail

using detail::pool_geometry;

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding) {
  const kernels::Pool2dGeometry g = pool_geometry("max_pool2d", x, kernel, stride, padding);
  Tensor y = Tensor::empty({g.n, g.c, g.ho, g.wo}, x.dtype(), x.device());
  Tensor argmax = Tensor::empty({g.n, g.c, g.ho, g.wo}, DType::i32, x.device());  // index in the [H, W] plane
  kernels::max_pool2d_forward(x.device())(x, y, argmax, g);
  if (!needs_grad({&x})) return y;
  return record("MaxPool2dBackward", {x}, y, [g, argmax](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];
    Tensor dx = Tensor::empty({g.n, g.c, g.h, g.w}, dy.dtype(), dy.device());
    kernels::max_pool2d_backward(dy.device())(dy, argmax, dx, g);
    return {dx};
  });
}

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding) {
  const kernels::Pool2dGeometry g = pool_geometry("avg_pool2d", x, kernel, stride, padding);
  Tensor y = Tensor::empty({g.n, g.c, g.ho, g.wo}, x.dtype(), x.device());
  kernels::avg_pool2d_forward(x.device())(x, y, g);
  if (!needs_grad({&x})) return y;
  return record("AvgPool2dBackward", {x}, y, [g](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];
    Tensor dx = Tensor::empty({g.n, g.c, g.h, g.w}, dy.dtype(), dy.device());
    kernels::avg_pool2d_backward(dy.device())(dy, dx, g);
    return {dx};
  });
}

}  // namespace tandem::ops
