// Shape op entries. reshape/flatten/slice0 are views whose backward reshapes or pads the gradient;
// transpose/permute/concat (and slice along an inner dim) copy through the backend's kernels; cast
// and to_device move back.
#include "runtime/ops/shape.h"

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/core.h"
#include "runtime/backend/shape.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {

Tensor reshape(const Tensor& a, const Shape& shape) {
  detail::check_defined(a, "reshape", "a");
  Tensor out = a.view(shape);  // checks the element count, infers -1
  if (!needs_grad({&a})) return out;
  const Shape in_shape = a.shape();
  return record("ReshapeBackward", {a}, out, [=](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].view(in_shape)};
  });
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  detail::check_defined(a, "flatten", "a");
  if (a.dim() == 0) return reshape(a, {1});
  const int64_t s = detail::normalize_dim(start_dim, a.dim(), "flatten");
  const int64_t e = detail::normalize_dim(end_dim, a.dim(), "flatten");
  TANDEM_CHECK(s <= e, "flatten: start_dim {} comes after end_dim {} for shape {}", start_dim, end_dim,
               shape_str(a.shape()));
  Shape out;
  int64_t merged = 1;
  for (int64_t i = 0; i < a.dim(); ++i) {
    const int64_t d = a.shape()[static_cast<size_t>(i)];
    if (i < s || i > e) {
      out.push_back(d);
    } else {
      merged *= d;
      if (i == e) out.push_back(merged);
    }
  }
  return reshape(a, out);
}

Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  detail::check_defined(a, "permute", "a");
  const int64_t r = a.dim();
  TANDEM_CHECK(static_cast<int64_t>(dims.size()) == r, "permute: {} dims given for a tensor of shape {}",
               dims.size(), shape_str(a.shape()));
  TANDEM_CHECK(r <= 8, "permute: at most 8 dims, got shape {}", shape_str(a.shape()));
  std::vector<int64_t> perm(dims.size()), inverse(dims.size(), -1);
  Shape out_shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = detail::normalize_dim(dims[i], r, "permute");
    TANDEM_CHECK(inverse[static_cast<size_t>(perm[i])] < 0, "permute: dim {} repeats in {} for shape {}", dims[i],
                 shape_str(dims), shape_str(a.shape()));
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    out_shape[i] = a.shape()[static_cast<size_t>(perm[i])];
  }
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  kernels::permute(a.device())(a, out, perm);
  if (!needs_grad({&a})) return out;
  return record("PermuteBackward", {a}, out, [=](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{permute(g[0], inverse)};
  });
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  detail::check_defined(a, "transpose", "a");
  const int64_t d0 = detail::normalize_dim(dim0, a.dim(), "transpose");
  const int64_t d1 = detail::normalize_dim(dim1, a.dim(), "transpose");
  std::vector<int64_t> perm(static_cast<size_t>(a.dim()));
  for (int64_t i = 0; i < a.dim(); ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
  return permute(a, perm);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
  TANDEM_CHECK(!tensors.empty(), "concat: needs at least one tensor");
  const Tensor& first = tensors[0];
  detail::check_defined(first, "concat", "tensors[0]");
  TANDEM_CHECK(first.dim() > 0, "concat: 0-dim tensors cannot be concatenated");
  const int64_t d = detail::normalize_dim(dim, first.dim(), "concat");
  Shape out_shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_compatible("concat", first, t);
    bool same = t.dim() == first.dim();
    for (int64_t j = 0; same && j < t.dim(); ++j)
      if (j != d && t.shape()[static_cast<size_t>(j)] != first.shape()[static_cast<size_t>(j)]) same = false;
    TANDEM_CHECK(same, "concat: tensor {} has shape {}, which differs from tensor 0's {} outside dim {}", i,
                 shape_str(t.shape()), shape_str(first.shape()), d);
    total += t.shape()[static_cast<size_t>(d)];
  }
  out_shape[static_cast<size_t>(d)] = total;
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  // As matrices [outer, n * inner]: each input fills its column range of the output.
  const detail::DimSplit so = detail::split_at(out_shape, d);
  const int64_t out_cols = total * so.inner;
  std::vector<int64_t> offsets, sizes;
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.shape()[static_cast<size_t>(d)];
    kernels::copy_block(out.device())(t, 0, n * so.inner, out, off * so.inner, out_cols, so.outer, n * so.inner);
    offsets.push_back(off);
    sizes.push_back(n);
    off += n;
  }
  if (!needs_grad(tensors)) return out;
  std::vector<bool> wanted;
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) {
    wanted.push_back(t.requires_grad());
    shapes.push_back(t.shape());
  }
  const int64_t outer = so.outer, inner = so.inner;
  return record("ConcatBackward", tensors, out, [=](const std::vector<Tensor>& g) {
    std::vector<Tensor> grads(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!wanted[i]) continue;
      grads[i] = Tensor::empty(shapes[i], g[0].dtype(), g[0].device());
      const int64_t cols = sizes[i] * inner;
      kernels::copy_block(g[0].device())(g[0], offsets[i] * inner, out_cols, grads[i], 0, cols, outer, cols);
    }
    return grads;
  });
}

Tensor slice0(const Tensor& a, int64_t start, int64_t end) {
  detail::check_defined(a, "slice0", "a");
  TANDEM_CHECK(a.dim() >= 1, "slice0: needs at least one dim, got a 0-dim tensor");
  TANDEM_CHECK(0 <= start && start <= end && end <= a.size(0),
               "slice0: rows [{}, {}) are not a range within dim 0 of shape {}", start, end, shape_str(a.shape()));
  Tensor out = a.narrow0(start, end - start);
  if (!needs_grad({&a})) return out;
  const Shape in_shape = a.shape();
  return record("Slice0Backward", {a}, out, [=](const std::vector<Tensor>& g) {
    // A slice of a parameter (GPT's position table, the first T of its rows): its rows of .grad
    // add g in place, the bits of the engine's add of the zero-padded gradient below, without it.
    Tensor sink = gradient_sink(0);
    if (sink.defined()) {
      Tensor rows = sink.narrow0(start, end - start);
      kernels::axpy(rows.device())(rows, g[0], 1.0);
      return std::vector<Tensor>{Tensor()};
    }
    Tensor gx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
    Tensor rows = gx.narrow0(start, end - start);
    rows.copy_(g[0]);
    return std::vector<Tensor>{gx};
  });
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
  detail::check_defined(a, "slice", "a");
  TANDEM_CHECK(a.dim() >= 1, "slice: needs at least one dim, got a 0-dim tensor");
  const int64_t d = detail::normalize_dim(dim, a.dim(), "slice");
  const detail::DimSplit s = detail::split_at(a.shape(), d);  // a as [outer, n, inner]
  TANDEM_CHECK(0 <= start && start <= end && end <= s.n,
               "slice: [{}, {}) is not a range within dim {} (of size {}) of shape {}; expected 0 <= start <= end <= {}",
               start, end, dim, s.n, shape_str(a.shape()), s.n);
  Shape out_shape = a.shape();
  out_shape[static_cast<size_t>(d)] = end - start;
  // Only size-1 dims before d: the slice is one contiguous run of a, a view as slice0's.
  if (s.outer == 1) return reshape(slice0(reshape(a, {s.n, s.inner}), start, end), out_shape);

  // As matrices [outer, n * inner]: the output is the column range [start * inner, end * inner).
  const int64_t outer = s.outer, in_cols = s.n * s.inner, cols = (end - start) * s.inner, col0 = start * s.inner;
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (cols > 0 && outer > 0) kernels::copy_block(a.device())(a, col0, in_cols, out, 0, cols, outer, cols);
  if (!needs_grad({&a})) return out;
  const Shape in_shape = a.shape();
  return record("SliceBackward", {a}, out, [=](const std::vector<Tensor>& g) {
    Tensor gx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
    if (cols > 0 && outer > 0) kernels::copy_block(gx.device())(g[0], 0, cols, gx, col0, in_cols, outer, cols);
    return std::vector<Tensor>{gx};
  });
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  TANDEM_CHECK(length >= 0, "narrow: length {} must be >= 0", length);
  return slice(a, dim, start, start + length);
}

Tensor cast(const Tensor& a, DType dtype) {
  detail::check_defined(a, "cast", "a");
  if (a.dtype() == dtype) return a;
  Tensor out = Tensor::empty(a.shape(), dtype, a.device());
  kernels::cast(a.device())(a, out);
  if (!needs_grad({&a}) || !is_floating(dtype)) return out;
  const DType back = a.dtype();
  return record("CastBackward", {a}, out, [=](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{cast(g[0], back)};
  });
}

Tensor to_device(const Tensor& a, Device device) {
  detail::check_defined(a, "to_device", "a");
  if (a.device() == device) return a;
  Tensor out = a.to(device);
  if (!needs_grad({&a})) return out;
  const Device back = a.device();
  return record("ToDeviceBackward", {a}, out, [=](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].to(back)};
  });
}

}  // namespace tandem::ops
