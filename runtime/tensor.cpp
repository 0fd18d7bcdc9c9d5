// Tensor: factories, views, data movement and host conversion.
#include "runtime/tensor.h"

#include <atomic>
#include <sstream>

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/convert_avx2.h"
#include "runtime/convert_avx512.h"
#include "runtime/backend/core.h"
#include "runtime/tensor_impl.h"

namespace tandem {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

namespace {

// The vectorised f32 <-> f16/bf16 loops on this CPU (AVX-512's, else AVX2's, else none), taken on
// first use (the CPU and TANDEM_CPU_ISA are read then, not at load time) and kept: batch norm's 16-bit
// kernels convert plane by plane (~50K calls a cnn step under autocast), and asking both ISAs'
// dispatchers on every call cost a fifth of the conversions' instructions. The call to pick them
// stays off convert_host's path once they are picked.
std::atomic<const ConvertLoops*> g_loops{nullptr};
__attribute__((noinline)) const ConvertLoops* pick_loops() {
  static const ConvertLoops none;
  const ConvertLoops* loops = convert_avx512_loops();
  if (!loops) loops = convert_avx2_loops();
  if (!loops) loops = &none;
  g_loops.store(loops, std::memory_order_release);
  return loops;
}

// Element by element (other pairs, or a CPU without AVX2): through float for the 16-bit types,
// through double otherwise (exact for i32 and f32). Out of line, so that convert_host's vector path
// sets up no frame for it.
__attribute__((noinline)) void convert_scalar(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                                              int64_t n) {
  dispatch(src_dtype, [&](auto stag) {
    using S = decltype(stag);
    dispatch(dst_dtype, [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>)
          d[i] = D(static_cast<float>(s[i]));
        else if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>)
          d[i] = static_cast<D>(static_cast<float>(s[i]));
        else
          d[i] = static_cast<D>(s[i]);
      }
    });
  });
}

}  // namespace

void convert_host(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  if (src_dtype == dst_dtype) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype));
    return;
  }
  if (n > 0) {
    const ConvertLoops* loops = g_loops.load(std::memory_order_acquire);
    if (!loops) loops = pick_loops();
    if (const ConvertLoop f = loop_for(*loops, src_dtype, dst_dtype)) return f(src, dst, n);  // the scalar's bits
  }
  convert_scalar(src, src_dtype, dst, dst_dtype, n);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) TANDEM_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return from_vector(v, {n}, dtype, device);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner) {
  auto impl = std::make_shared<TensorImpl>();
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(data, nbytes, device, owner ? std::move(owner) : std::make_shared<int>(0));
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// The accessors are out of line so that TensorImpl stays internal. Ops read them a few times per call,
// not per element (kernels take raw pointers); where the call itself changed a hot loop's code, the
// library reads the fields inline instead (data_ptr_inline, dtype_inline in tensor_impl.h).
const Shape& Tensor::shape() const { return impl_->shape; }
int64_t Tensor::dim() const { return static_cast<int64_t>(impl_->shape.size()); }
int64_t Tensor::numel() const { return shape_numel(impl_->shape); }
DType Tensor::dtype() const { return impl_->dtype; }
Device Tensor::device() const { return impl_->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_->storage; }
size_t Tensor::storage_offset() const { return impl_->offset; }
void* Tensor::data_ptr() const { return static_cast<char*>(impl_->storage->data()) + impl_->offset; }
const std::string& Tensor::name() const { return impl_->name; }
Tensor& Tensor::set_name(std::string n) {
  impl_->name = std::move(n);
  return *this;
}
bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
bool Tensor::is_leaf() const { return !impl_->grad_fn; }
Tensor Tensor::grad() const { return Tensor(impl_->grad); }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_->grad_fn; }

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  TANDEM_CHECK(d >= -n && d < n, "dimension {} out of range for a tensor of shape {}", d, shape_str(shape()));
  return impl_->shape[static_cast<size_t>(d < 0 ? d + n : d)];
}

Tensor& Tensor::set_requires_grad(bool r) {
  TANDEM_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can be marked (this one came from {})",
               impl_->grad_fn ? impl_->grad_fn->name() : "?");
  TANDEM_CHECK(!r || is_floating(dtype()), "only floating-point tensors can require grad, not {}",
               dtype_name(dtype()));
  impl_->requires_grad = r;
  return *this;
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    impl_->grad.reset();
    return;
  }
  TANDEM_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(),
               "set_grad: gradient {} {} on {} does not match tensor {} {} on {}", shape_str(g.shape()),
               dtype_name(g.dtype()), g.device().str(), shape_str(shape()), dtype_name(dtype()), device().str());
  impl_->grad = g.impl_ptr();
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward({*this}, {grad}, retain_graph);
}

void Tensor::add_grad_ready_hook(GradReadyHook hook) {
  TANDEM_CHECK(is_leaf(), "grad-ready hooks go on leaf tensors");
  impl_->grad_ready_hooks.push_back(std::move(hook));
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  Tensor out = empty(shape(), dtype(), device);
  Device slot = device.is_cpu() ? this->device() : device;
  kernels::copy(slot)(*this, out);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  kernels::copy(device())(*this, out);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  TANDEM_CHECK(src.numel() == numel(), "copy_: source {} has {} elements, destination {} has {}",
               shape_str(src.shape()), src.numel(), shape_str(shape()), numel());
  Tensor s = src;
  if (s.dtype() != dtype()) {  // convert on the source's device, then move
    Tensor converted = empty(s.shape(), dtype(), s.device());
    kernels::cast(s.device())(s, converted);
    s = converted;
  }
  Device slot = device().is_cpu() ? s.device() : device();
  kernels::copy(slot)(s, *this);
}

void Tensor::fill_(double value) { kernels::fill(device())(*this, value); }

Tensor Tensor::view(const Shape& new_shape) const {
  Shape s = new_shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TANDEM_CHECK(infer < 0, "view {}: only one dimension can be -1", shape_str(new_shape));
      infer = static_cast<int64_t>(i);
    } else {
      TANDEM_CHECK(s[i] >= 0, "view {}: negative dimension", shape_str(new_shape));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    TANDEM_CHECK(known != 0 && numel() % known == 0, "view {}: cannot infer -1 for {} elements",
                 shape_str(new_shape), numel());
    s[static_cast<size_t>(infer)] = numel() / known;
  }
  TANDEM_CHECK(shape_numel(s) == numel(), "view: shape {} is invalid for a tensor of shape {} ({} elements)",
               shape_str(new_shape), shape_str(shape()), numel());
  Tensor out = detach();
  out.impl_->shape = s;
  return out;
}

Tensor Tensor::narrow0(int64_t start, int64_t length) const {
  TANDEM_CHECK(dim() >= 1, "narrow0 needs at least one dimension");
  TANDEM_CHECK(start >= 0 && length >= 0 && start + length <= shape()[0],
               "narrow0: rows [{}, {}) out of range for shape {}", start, start + length, shape_str(shape()));
  Tensor out = detach();
  int64_t row = numel() / std::max<int64_t>(shape()[0], 1);
  out.impl_->offset += static_cast<size_t>(start * row) * element_size();
  out.impl_->shape[0] = length;
  return out;
}

double Tensor::item() const {
  TANDEM_CHECK(numel() == 1, "item() needs exactly one element, tensor has shape {}", shape_str(shape()));
  return to_vector<double>()[0];
}

std::string Tensor::str(int64_t max_elems) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(" << shape_str(shape()) << ", " << dtype_name(dtype()) << ", " << device().str() << ", [";
  auto v = to_vector<double>();
  for (int64_t i = 0; i < std::min<int64_t>(max_elems, numel()); ++i) os << (i ? ", " : "") << v[static_cast<size_t>(i)];
  if (numel() > max_elems) os << ", ...";
  os << "])";
  return os.str();
}

}  // namespace tandem
