// Embedding kernel tables: gather forward, deterministic scatter-add backward.
#pragma once
#include "runtime/backend/registry.h"
#include "runtime/tensor.h"

namespace tandem::kernels {

// indices [n] (i32 or i64, any shape flattened), weight [V, D] -> out [n, D], out[i] = weight[indices[i]].
// An index outside [0, V) is an error (ValueError), found by the kernel, unless `checked`: the caller
// has checked these indices already (ops::embedding, on the host copy its backward keeps), and a
// device backend then neither checks them again nor waits for the device to report.
TANDEM_KERNEL(embedding_forward, void(const Tensor& indices, const Tensor& weight, Tensor& out, bool checked));
// dweight [V, D] = sum over i of dy[i] into row indices[i], overwriting dweight, or with `accumulate`
// added to it (each row's sum rounded to dy's dtype first, as if made apart and then added: a
// parameter's .grad). Deterministic: each row's contributions are added in increasing i (no float
// atomics). indices may be a CPU tensor for any backend (the CUDA backend plans the sums on the host:
// given host indices it need not wait for the device to copy them).
TANDEM_KERNEL(embedding_backward, void(const Tensor& indices, const Tensor& dy, Tensor& dweight, bool accumulate));

// The ValueError of every backend for index v at position i, outside a table of V rows.
[[noreturn]] void fail_embedding_index(int64_t v, int64_t i, int64_t V);
// Throws fail_embedding_index's error at the first of the CPU tensor `indices` (i32 or i64) outside
// [0, V): the op's check of the host copy it keeps (ops::embedding).
void check_embedding_indices(const Tensor& indices, int64_t V);

}  // namespace tandem::kernels
