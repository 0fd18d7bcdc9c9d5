// Reduction op entries: sum and mean (all elements or one dim) with their broadcast backward, and
// argmax.
#include "runtime/ops/reduce.h"

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/reduce.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {
namespace {

// out[kept_shape] = scale * sum(a) over the dims where kept_shape has 1; returned as out_shape.
Tensor reduce_entry(const char* name, const Tensor& a, const Shape& kept_shape, const Shape& out_shape,
                    double scale) {
  Tensor out = Tensor::empty(kept_shape, a.dtype(), a.device());
  kernels::sum_to(a.device())(a, out, scale);
  if (out_shape != kept_shape) out = out.view(out_shape);
  if (!needs_grad({&a})) return out;
  const Shape in_shape = a.shape();
  std::string node_name = std::string(name) + "Backward";
  return record(node_name.c_str(), {a}, out, [=](const std::vector<Tensor>& g) {
    Tensor gx = Tensor::empty(in_shape, g[0].dtype(), g[0].device());
    kernels::expand(g[0].device())(g[0].view(kept_shape), gx, scale);
    return std::vector<Tensor>{gx};
  });
}

Tensor prepare(const char* name, const Tensor& a, bool floating_only) {
  detail::check_defined(a, name, "a");
  Tensor x = autocast_arg(a, AutocastCategory::Float32);
  if (floating_only) detail::check_floating(name, x);
  TANDEM_CHECK(x.dtype() != DType::u8, "{}: dtype u8 is not supported ({})", name, detail::describe(x));
  return x;
}

Tensor reduce_dim(const char* name, const Tensor& a, int64_t dim, bool keepdim, bool mean) {
  Tensor x = prepare(name, a, mean);
  TANDEM_CHECK(x.dim() > 0, "{}: dim {} given for a 0-dim tensor; use {}(a) for all elements", name, dim, name);
  const int64_t d = detail::normalize_dim(dim, x.dim(), name);
  Shape kept = x.shape(), dropped;
  kept[static_cast<size_t>(d)] = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) dropped.push_back(x.shape()[static_cast<size_t>(i)]);
  const int64_t n = x.shape()[static_cast<size_t>(d)];
  return reduce_entry(name, x, kept, keepdim ? kept : dropped, mean ? 1.0 / static_cast<double>(n) : 1.0);
}

}  // namespace

Tensor sum(const Tensor& a) {
  Tensor x = prepare("sum", a, false);
  return reduce_entry("sum", x, Shape{}, Shape{}, 1.0);
}

Tensor sum(const Tensor& a, int64_t dim, bool keepdim) { return reduce_dim("sum", a, dim, keepdim, false); }

Tensor mean(const Tensor& a) {
  Tensor x = prepare("mean", a, true);
  return reduce_entry("mean", x, Shape{}, Shape{}, 1.0 / static_cast<double>(x.numel()));  // empty: NaN
}

Tensor mean(const Tensor& a, int64_t dim, bool keepdim) { return reduce_dim("mean", a, dim, keepdim, true); }

Tensor argmax(const Tensor& a, int64_t dim) {
  detail::check_defined(a, "argmax", "a");
  TANDEM_CHECK(a.dim() > 0, "argmax: needs at least one dim, got a 0-dim tensor");
  const int64_t d = detail::normalize_dim(dim, a.dim(), "argmax");
  detail::DimSplit s = detail::split_at(a.shape(), d);
  TANDEM_CHECK(s.n > 0, "argmax: dim {} of {} is empty; the max of no elements is undefined", dim,
               detail::describe(a));
  Shape out_shape;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (i != d) out_shape.push_back(a.shape()[static_cast<size_t>(i)]);
  Tensor out = Tensor::empty(out_shape, DType::i64, a.device());
  kernels::argmax(a.device())(a, out, s.outer, s.n, s.inner);
  return out;
}

}  // namespace tandem::ops
