// embedding entry: gather rows of weight by index; backward scatter-adds into a dense dweight in index
// order (deterministic), or straight into the table's .grad (gradient_sink).
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/embedding.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops {

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  detail::check_defined(indices, "embedding", "indices");
  detail::check_defined(weight, "embedding", "weight");
  TANDEM_CHECK(indices.dtype() == DType::i32 || indices.dtype() == DType::i64,
               "embedding: indices must be i32 or i64, got {}", detail::describe(indices));
  TANDEM_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got {}", detail::describe(weight));
  detail::check_floating("embedding", weight);
  TANDEM_CHECK(indices.device() == weight.device(), "embedding: indices on {} but weight on {}",
               indices.device().str(), weight.device().str());
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  if (!needs_grad({&weight})) {
    kernels::embedding_forward(weight.device())(indices, weight, out, /*checked=*/false);
    return out;
  }
  const Shape w_shape = weight.shape();
  // On a device, the backward's plan of the sums is made on the host: a host copy of the indices
  // taken now spares the backward a copy that would wait for the whole backward queued before it.
  // The forward checks that copy (contiguous: to() packs it) on the host, so the kernel neither
  // checks nor makes the host wait for its verdict: one wait for the device instead of two.
  Tensor saved = indices;
  if (!indices.device().is_cpu()) {
    saved = indices.to(kCPU);
    kernels::check_embedding_indices(saved, weight.size(0));
  }
  kernels::embedding_forward(weight.device())(indices, weight, out, /*checked=*/!indices.device().is_cpu());
  return record("EmbeddingBackward", {weight}, out, [indices = saved, w_shape](const std::vector<Tensor>& grads) {
    const Tensor& dy = grads[0];  // [..., D]
    Tensor sink = gradient_sink(0);
    if (sink.defined() && sink.dtype() == dy.dtype()) {  // no [V, D] of mostly zeros, no pass adding it
      kernels::embedding_backward(dy.device())(indices, dy, sink, true);
      return std::vector<Tensor>{Tensor()};
    }
    Tensor dw = Tensor::empty(w_shape, dy.dtype(), dy.device());
    kernels::embedding_backward(dy.device())(indices, dy, dw, false);
    return std::vector<Tensor>{dw};
  });
}

}  // namespace tandem::ops
