// Embedding of the CUDA backend. Forward: a row gather, one thread per output element.
// Backward without float atomics: the indices go to the host once, a stable counting sort makes a
// per-row list of positions (in increasing order), and one block per used row adds its dy rows in
// that order, so dweight is bitwise the CPU's and the same on every run.
#include <vector>

#include "kernels/cuda/common.cuh"
#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/embedding.h"

namespace tandem::TANDEM_CUDA_NS {
namespace {

template <class I, class T>
__global__ void embedding_forward_kernel(const I* __restrict__ idx, const T* __restrict__ w, T* __restrict__ out,
                                         int64_t n, int64_t V, int64_t D, long long* __restrict__ bad) {
  const int64_t total = n * D;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t i = e / D, d = e % D;
    const int64_t v = static_cast<int64_t>(idx[i]);
    if (v < 0 || v >= V) {  // never with bad null: the caller checked the indices
      if (bad && d == 0) atomicMin(bad, static_cast<long long>(i));
      continue;
    }
    out[e] = w[v * D + d];
  }
}

// rows[r] (r < used): the row; positions[start[r] .. start[r+1]) its dy rows, increasing.
template <class T>
__global__ void embedding_backward_kernel(const T* __restrict__ dy, const int64_t* __restrict__ rows,
                                          const int64_t* __restrict__ start, const int64_t* __restrict__ positions,
                                          int64_t used, int64_t D, bool accumulate, T* __restrict__ dweight) {
  using A = acc_t<T>;
  for (int64_t r = blockIdx.x; r < used; r += gridDim.x) {
    T* out = dweight + rows[r] * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      A acc = A(0);
      for (int64_t k = start[r]; k < start[r + 1]; ++k) acc += to_acc(dy[positions[k] * D + d]);
      const T sum = from_acc<T>(acc);
      out[d] = accumulate ? from_acc<T>(to_acc(out[d]) + to_acc(sum)) : sum;
    }
  }
}

void embedding_forward(const Tensor& indices, const Tensor& weight, Tensor& out, bool checked) {
  const Device dev = weight.device();
  check_on_device("embedding", dev, {&indices, &weight, &out});
  const int64_t n = indices.numel(), V = weight.size(0), D = weight.size(1);
  if (n == 0 || D == 0) return;
  // Unchecked indices: the first bad position, n for none, found by the kernel; the host waits for it.
  Tensor bad = checked ? Tensor() : Tensor::full({1}, static_cast<double>(n), DType::i64, dev);
  dispatch_index_type(indices, "embedding: indices", [&](auto itag) {
    using I = decltype(itag);
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      TANDEM_LAUNCH(embedding_forward_kernel<I, T>, grid_for(n * D, kBlock), kBlock, 0, stream_for(dev),
                    static_cast<const I*>(indices.data_ptr()), static_cast<const T*>(weight.data_ptr()),
                    static_cast<T*>(out.data_ptr()), n, V, D,
                    checked ? nullptr : static_cast<long long*>(bad.data_ptr()));
    });
  });
  if (checked) return;
  const int64_t i = bad.to_vector<int64_t>()[0];  // waits for the kernel
  if (i != n) kernels::fail_embedding_index(indices.view({-1}).narrow0(i, 1).to_vector<int64_t>()[0], i, V);
}

void embedding_backward(const Tensor& indices, const Tensor& dy, Tensor& dweight, bool accumulate) {
  const Device dev = dweight.device();
  check_on_device("embedding backward", dev, {&dy, &dweight});
  if (!indices.device().is_cpu()) check_on_device("embedding backward", dev, {&indices});
  const int64_t V = dweight.size(0), D = dweight.size(1);
  if (!accumulate) dweight.zero_();
  // The plan is made on the host: from device indices that is a copy the host waits for (every
  // kernel queued before it finishes first); host indices need none.
  const std::vector<int64_t> idx = indices.to_vector<int64_t>();
  const int64_t n = static_cast<int64_t>(idx.size());
  // Stable counting sort of positions by row.
  std::vector<int64_t> count(static_cast<size_t>(V) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = idx[static_cast<size_t>(i)];
    if (v < 0 || v >= V) kernels::fail_embedding_index(v, i, V);
    ++count[static_cast<size_t>(v)];
  }
  std::vector<int64_t> rows, start{0};
  std::vector<int64_t> fill(static_cast<size_t>(V), -1);
  for (int64_t v = 0; v < V; ++v)
    if (count[static_cast<size_t>(v)] > 0) {
      fill[static_cast<size_t>(v)] = start.back();
      rows.push_back(v);
      start.push_back(start.back() + count[static_cast<size_t>(v)]);
    }
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(fill[static_cast<size_t>(idx[static_cast<size_t>(i)])]++)] = i;
  const int64_t used = static_cast<int64_t>(rows.size());
  if (used == 0 || D == 0) return;
  // One upload for the three arrays.
  std::vector<int64_t> plan;
  plan.reserve(rows.size() + start.size() + positions.size());
  plan.insert(plan.end(), rows.begin(), rows.end());
  plan.insert(plan.end(), start.begin(), start.end());
  plan.insert(plan.end(), positions.begin(), positions.end());
  Tensor d_plan = Tensor::from_vector(plan, {static_cast<int64_t>(plan.size())}, DType::i64, dev);
  const int64_t* p = static_cast<const int64_t*>(d_plan.data_ptr());
  dispatch_floating(dy.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    const unsigned threads = static_cast<unsigned>(D >= 256 ? 256 : (D + 31) / 32 * 32);
    TANDEM_LAUNCH(embedding_backward_kernel<T>, grid_for(used, 1), threads, 0, stream_for(dev),
                  static_cast<const T*>(dy.data_ptr()), p, p + used, p + 2 * used + 1, used, D, accumulate,
                  static_cast<T*>(dweight.data_ptr()));
  });
}

TANDEM_REGISTER_KERNEL(kernels::embedding_forward, kKind, embedding_forward);
TANDEM_REGISTER_KERNEL(kernels::embedding_backward, kKind, embedding_backward);

}  // namespace
}  // namespace tandem::TANDEM_CUDA_NS
