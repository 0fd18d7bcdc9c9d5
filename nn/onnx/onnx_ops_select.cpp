// The ONNX ops of masks and index arithmetic, as transformer decoders export them: comparisons
// (Equal, Less, Greater, Not), Where, Expand, Slice, Range and ConstantOfShape. A causal mask's condition is computed
// from a buffer and the sequence length (`bias[:, :, :T, :T] == 0`), so the comparisons run on host
// values, where the shape arithmetic already runs; Where is tandem's select, on the device, with its
// gradient; Expand and Slice are tandem's differentiable ops.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nn/onnx/onnx_op_parts.h"
#include "runtime/backend/elementwise.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::onnx::detail {

namespace {

// Host values are masks, shapes and positions: a few thousand numbers. A graph asking for more (a
// hostile Range or ConstantOfShape) is refused before anything is allocated.
constexpr int64_t kMaxHostValues = int64_t(1) << 24;

void check_host_count(const OpCall& c, const Shape& shape) {
  int64_t n = 1;  // multiplied with a bound at each step: a hostile shape cannot overflow it
  for (int64_t d : shape) {
    if (d == 0) return;
    n = d > kMaxHostValues / n ? kMaxHostValues + 1 : n * d;
  }
  if (n > kMaxHostValues)
    c.fail(fmt::format("shape {}: more values than tandem computes on the host ({}: masks, shapes and positions)",
                       shape_str(shape), kMaxHostValues));
}

// f over the elements of a and b broadcast together (NumPy), as host integers.
template <class F>
Value host_broadcast(const OpCall& c, const Value& a, const Value& b, F f) {
  const Shape sa = a.dims(), sb = b.dims();
  const Shape out = kernels::broadcast_shapes(sa, sb, c.node.op.c_str());
  check_host_count(c, out);
  const std::vector<double> x = a.numbers(), y = b.numbers();
  const kernels::BroadcastPlan plan = kernels::broadcast_plan(out, {sa, sb});
  std::vector<int64_t> r(static_cast<size_t>(shape_numel(out)));
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), oa = 0, ob = 0;
    for (size_t d = plan.sizes.size(); d-- > 0;) {
      const int64_t k = rem % plan.sizes[d];
      rem /= plan.sizes[d];
      oa += k * plan.strides[0][d];
      ob += k * plan.strides[1][d];
    }
    r[i] = f(x[static_cast<size_t>(oa)], y[static_cast<size_t>(ob)]) ? 1 : 0;
  }
  return Value::of_ints(std::move(r), out);
}

template <class F>
std::vector<Value> compare(const OpCall& c, F f) {
  return {host_broadcast(c, c.input(0), c.input(1), f)};
}

// A condition as a u8 tensor on the model's device: a boolean graph input is one already; host
// values (a computed mask) are copied there once per forward.
Tensor condition(const Value& v, Device device) {
  if (!v.host && v.t.dtype() == DType::u8) return v.t.to(device);
  const std::vector<double> n = v.numbers();
  std::vector<uint8_t> bits(n.size());
  for (size_t i = 0; i < n.size(); ++i) bits[i] = n[i] != 0 ? 1 : 0;
  return Tensor::from_vector<uint8_t>(bits, v.dims()).to(device);
}

// ONNX's Slice bounds for one axis of size n (step 1): negative counts from the end, then clamped to
// [0, n]; an end before the start is an empty range.
std::pair<int64_t, int64_t> slice_bounds(int64_t start, int64_t end, int64_t n) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
  return {start, std::max(start, end)};
}

}  // namespace

std::vector<Value> op_equal(const OpCall& c) { return compare(c, [](double a, double b) { return a == b; }); }
std::vector<Value> op_less(const OpCall& c) { return compare(c, [](double a, double b) { return a < b; }); }
std::vector<Value> op_greater(const OpCall& c) { return compare(c, [](double a, double b) { return a > b; }); }

std::vector<Value> op_not(const OpCall& c) {
  const Value& x = c.input(0);
  std::vector<int64_t> r;
  for (double v : x.numbers()) r.push_back(v == 0 ? 1 : 0);
  return {Value::of_ints(std::move(r), x.dims())};
}

// Where(cond, X, Y): tandem's select. Host X and Y (index arithmetic) give host integers.
std::vector<Value> op_where(const OpCall& c) {
  const Value &cond = c.input(0), &x = c.input(1), &y = c.input(2);
  if (x.host && y.host) {
    const Tensor t = ops::where(condition(cond, kCPU), x.tensor(kCPU), y.tensor(kCPU));
    return {Value::of_ints(t.to_vector<int64_t>(), t.shape())};
  }
  const Tensor a = x.tensor(c.device), b = y.tensor(c.device);
  if (a.dtype() != b.dtype())
    c.fail(fmt::format("X is {} and Y is {}; Where takes one type", dtype_name(a.dtype()), dtype_name(b.dtype())));
  return one(ops::where(condition(cond, c.device), a, b));
}

// Expand(x, shape): x broadcast to shape (both ways: a 1 in `shape` keeps x's dim). A tensor is
// multiplied by ones: exact (x * 1 is x, infinities and -0 included), and its gradient sums back.
std::vector<Value> op_expand(const OpCall& c) {
  const Value& x = c.input(0);
  const std::vector<int64_t> want = c.input(1).integers();
  for (int64_t d : want)
    if (d < 0) c.fail(fmt::format("shape [{}] has a negative dim", fmt::join(want, ", ")));
  const Shape out = kernels::broadcast_shapes(x.dims(), Shape(want.begin(), want.end()), "Expand");
  if (x.host) {
    check_host_count(c, out);
    Value ones = Value::of_ints(std::vector<int64_t>(static_cast<size_t>(shape_numel(out)), 1), out);
    const Tensor t = ops::mul(x.tensor(kCPU), ones.tensor(kCPU));
    return {Value::of_ints(t.to_vector<int64_t>(), out)};
  }
  if (x.t.shape() == out) return {x};
  return one(ops::mul(x.t, Tensor::ones(out, x.t.dtype(), x.t.device())));
}

// Slice (opset 10+: starts, ends, axes, steps as inputs). Steps of 1 only: what `x[:, :T]` and a
// mask's `[:, :, :T, :T]` export; a strided or reversed slice is refused.
std::vector<Value> op_slice(const OpCall& c) {
  const Value& x = c.input(0);
  const Shape dims = x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  const std::vector<int64_t> starts = c.input(1).integers(), ends = c.input(2).integers();
  std::vector<int64_t> axes = c.has_input(3) ? c.input(3).integers() : std::vector<int64_t>{};
  const std::vector<int64_t> steps = c.has_input(4) ? c.input(4).integers() : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (ends.size() != starts.size() || axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
    c.fail(fmt::format("starts, ends, axes and steps have {}, {}, {} and {} entries", starts.size(), ends.size(),
                       axes.size(), steps.size()));
  for (int64_t s : steps)
    if (s != 1) c.fail(fmt::format("steps [{}]: only step 1 is supported", fmt::join(steps, ", ")));
  if (x.host) {
    if (rank != 1 || starts.size() != 1) c.fail("an integer Slice of rank > 1 is not supported");
    const auto [lo, hi] = slice_bounds(starts[0], ends[0], dims[0]);
    axis_of(c, axes[0], 1);
    std::vector<int64_t> part(x.ints.begin() + lo, x.ints.begin() + hi);
    return {Value::of_ints(std::move(part), {hi - lo})};
  }
  Tensor t = x.t;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t axis = axis_of(c, axes[k], rank);
    const auto [lo, hi] = slice_bounds(starts[k], ends[k], t.size(axis));
    if (lo != 0 || hi != t.size(axis)) t = ops::slice(t, axis, lo, hi);
  }
  return one(t);
}

// ConstantOfShape(shape): one value everywhere (attribute `value`, float 0 by default). Integers are
// host values: torch's expand(b, t) exports ConstantOfShape, Equal and Where on its shape.
std::vector<Value> op_constant_of_shape(const OpCall& c) {
  const std::vector<int64_t> dims = c.input(0).integers();
  for (int64_t d : dims)
    if (d < 0) c.fail(fmt::format("shape [{}] has a negative dim", fmt::join(dims, ", ")));
  const Shape shape(dims.begin(), dims.end());
  const Tensor* value = c.attr_tensor("value");
  if (value != nullptr && value->numel() != 1) c.fail("value must hold one element");
  if (value != nullptr && !is_floating(value->dtype())) {
    check_host_count(c, shape);
    const int64_t v = value->to_vector<int64_t>()[0];
    return {Value::of_ints(std::vector<int64_t>(static_cast<size_t>(shape_numel(shape)), v), shape)};
  }
  const double v = value != nullptr ? value->to_vector<double>()[0] : 0.0;
  return one(Tensor::full(shape, v, value != nullptr ? value->dtype() : DType::f32, c.device));
}

// Range(start, limit, delta): positions (`torch.arange(T)`), host integers for integer inputs; a
// float range is a constant tensor.
std::vector<Value> op_range(const OpCall& c) {
  const Value &s = c.input(0), &l = c.input(1), &d = c.input(2);
  const std::vector<double> start = s.numbers(), limit = l.numbers(), delta = d.numbers();
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1) c.fail("start, limit and delta must be scalars");
  if (delta[0] == 0) c.fail("delta is 0");
  const double count = std::max(std::ceil((limit[0] - start[0]) / delta[0]), 0.0);
  if (std::isnan(count)) c.fail("start, limit or delta is NaN");
  if (count > static_cast<double>(kMaxHostValues)) c.fail(fmt::format("a range of {} values is too long", count));
  const int64_t n = static_cast<int64_t>(count);
  const bool integer = s.host || !is_floating(s.t.dtype());
  if (integer) {
    // Bounds within 2^53 (exact as the doubles they came through): every value, start + i * delta
    // with i under 2^24, is then exact in int64, where larger ones could overflow it.
    constexpr double kExact = 9007199254740992.0;
    if (!(std::abs(start[0]) <= kExact && std::abs(limit[0]) <= kExact && std::abs(delta[0]) <= kExact))
      c.fail(fmt::format("integer bounds beyond 2^53 (start {}, limit {}, delta {})", start[0], limit[0], delta[0]));
    const int64_t first = static_cast<int64_t>(start[0]), step = static_cast<int64_t>(delta[0]);
    std::vector<int64_t> r(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = first + i * step;
    return {Value::of_ints(std::move(r), {n})};
  }
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = start[0] + static_cast<double>(i) * delta[0];
  return one(Tensor::from_vector<double>(r, {n}, s.t.dtype(), c.device));
}

}  // namespace tandem::nn::onnx::detail
