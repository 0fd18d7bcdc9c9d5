// TensorImpl: the state behind a Tensor handle (data, shape, dtype, autograd links). Internal: the
// library's ops, autograd and backends include it; the installed headers only forward-declare it,
// so its layout can change without breaking a consumer's build.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/storage.h"
#include "runtime/tensor.h"

namespace tandem {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes into storage
  Shape shape;
  DType dtype = DType::f32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;    // a leaf's accumulated gradient
  std::shared_ptr<Node> grad_fn;       // the node that made this tensor (non-leaf)
  int output_nr = 0;                   // which output of grad_fn
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad node, made lazily
  std::vector<GradReadyHook> grad_ready_hooks;
  std::string name;  // optional, used in error messages (parameter names)
};

// Tensor::data_ptr() and dtype() inline, for the library's hot loops. The members are out of line so
// that the installed headers never show TensorImpl; the call itself costs little, but in the fused
// optimizer kernels (kernels/cpu/multi_tensor.cpp) an opaque call before each chunk's loop changed
// how GCC unswitched and vectorised it (+54% instructions in the SGD update), and these bring back
// the code of the inline members.
inline void* data_ptr_inline(const Tensor& t) {
  const TensorImpl* impl = t.impl();
  return static_cast<char*>(impl->storage->data()) + impl->offset;
}
inline DType dtype_inline(const Tensor& t) { return t.impl()->dtype; }

}  // namespace tandem
