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

}  // namespace tandem
