// Tensor: a shared handle to a contiguous, row-major array with shape, dtype and device, plus its
// autograd state. Copies of a Tensor alias the same data (like PyTorch). Views (reshape, a slice
// along dim 0) share Storage at a byte offset.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"

namespace tandem {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 3]"
int64_t shape_numel(const Shape& s);

class Node;
class Tensor;
using GradReadyHook = std::function<void(Tensor& leaf)>;

// Defined in runtime/tensor_impl.h, which only the library's own code includes: a consumer holds
// tensors through Tensor and never sees (or depends on) the layout of their state.
struct TensorImpl;
class Storage;  // runtime/storage.h, internal as well: one allocation, shared by a tensor's views

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = kCPU);
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = kCPU);
  // Copies host values, converting to dtype, then moves to device.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype = dtype_v<T>,
                            Device device = kCPU);
  static Tensor arange(int64_t n, DType dtype = DType::i64, Device device = kCPU);
  // Wraps memory owned elsewhere; `owner` keeps it alive.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                          std::shared_ptr<void> owner);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  size_t element_size() const { return dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  size_t storage_offset() const;
  void* data_ptr() const;
  template <class T>
  T* data() const;  // checks dtype_v<T> == dtype()
  // The state behind the handle, opaque outside the library (runtime/tensor_impl.h).
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  const std::string& name() const;
  Tensor& set_name(std::string n);

  // ---- autograd ----
  bool requires_grad() const;  // false for an undefined tensor
  Tensor& set_requires_grad(bool r = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& g);  // checks shape/dtype/device
  const std::shared_ptr<Node>& grad_fn() const;
  // Backpropagates from this tensor (a scalar unless `grad` is given) into the leaves' grads.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  // Runs after this leaf's gradient for the current backward pass is fully accumulated.
  void add_grad_ready_hook(GradReadyHook hook);
  Tensor detach() const;  // shares data, no autograd history

  // ---- data movement (not differentiable; see ops::to / ops::cast for the differentiable ones) ----
  Tensor to(Device device) const;  // copy across devices (same dtype); self when already there
  Tensor clone() const;            // a new contiguous copy on the same device
  void copy_(const Tensor& src);   // same shape; converts dtype; any devices
  void fill_(double value);
  void zero_() { fill_(0.0); }
  // Views sharing storage.
  Tensor view(const Shape& shape) const;  // same numel; -1 infers one dim
  Tensor narrow0(int64_t start, int64_t length) const;  // rows [start, start+length) along dim 0

  template <class T>
  std::vector<T> to_vector() const;  // converts to T; copies from any device
  double item() const;              // one element
  std::string str(int64_t max_elems = 16) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Host-side element conversion used by from_vector / to_vector (defined in tensor.cpp).
void convert_host(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

template <class T>
T* Tensor::data() const {
  TANDEM_CHECK(dtype() == dtype_v<T>, "tensor has dtype {}, accessed as {}", dtype_name(dtype()),
               dtype_name(dtype_v<T>));
  return static_cast<T*>(data_ptr());
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, DType dtype, Device device) {
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
               "from_vector: {} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor host = empty(shape, dtype, kCPU);
  convert_host(values.data(), dtype_v<T>, host.data_ptr(), dtype, host.numel());
  return device == kCPU ? host : host.to(device);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = device().is_cpu() ? *this : to(kCPU);
  std::vector<T> out(static_cast<size_t>(numel()));
  convert_host(host.data_ptr(), dtype(), out.data(), dtype_v<T>, numel());
  return out;
}

}  // namespace tandem
