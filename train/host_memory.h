// Keeps freed host memory in the process instead of handing it back to the kernel, so a training
// step reuses last step's pages instead of faulting in fresh zeroed ones (glibc serves blocks of
// a few MB, like the cnn's activations, with mmap and unmaps them on free: ~7% of a cnn step).
// Tensors' own blocks are kept by the library's host cache (runtime/host_cache.h), which embedders
// get too; this covers the rest (Eigen's temporaries, the loaders' buffers) in the apps, which own
// their process's malloc settings as a library must not.
#pragma once
#include <malloc.h>

namespace tandem::train {

inline void keep_freed_host_memory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // blocks below 1 GiB come from the heap ...
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // ... and the heap's top is not trimmed below 1 GiB free
}

}  // namespace tandem::train
