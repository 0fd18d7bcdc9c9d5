// CPU embedding: row gather forward; backward adds dy rows into dweight in index order (deterministic,
// no atomics).
#include <algorithm>
#include <vector>

#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/embedding.h"

namespace tandem::kernels {
namespace {

template <class I, class F>
void for_each_index(const Tensor& indices, int64_t vocab, F&& f) {
  const I* idx = static_cast<const I*>(indices.data_ptr());
  const int64_t n = indices.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(idx[i]);
    if (v < 0 || v >= vocab) fail_embedding_index(v, i, vocab);
    f(i, v);
  }
}

// Checks the indices whether or not `checked`: on the host that costs no wait.
void cpu_embedding_forward(const Tensor& indices, const Tensor& weight, Tensor& out, bool /*checked*/) {
  const int64_t V = weight.size(0), D = weight.size(1);
  const size_t row = static_cast<size_t>(D) * weight.element_size();
  const char* w = static_cast<const char*>(weight.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  dispatch_index_type(indices, "embedding: indices", [&](auto itag) {
    using I = decltype(itag);
    for_each_index<I>(indices, V, [&](int64_t i, int64_t v) {
      std::copy(w + v * row, w + (v + 1) * row, o + i * row);
    });
  });
}

void cpu_embedding_backward(const Tensor& indices, const Tensor& dy, Tensor& dweight, bool accumulate) {
  const int64_t V = dweight.size(0), D = dweight.size(1);
  dispatch_floating(dy.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    std::vector<A> acc(static_cast<size_t>(V * D), A(0));
    const T* g = static_cast<const T*>(dy.data_ptr());
    dispatch_index_type(indices, "embedding: indices", [&](auto itag) {
      using I = decltype(itag);
      for_each_index<I>(indices, V, [&](int64_t i, int64_t v) {
        A* dst = acc.data() + v * D;
        const T* src = g + i * D;
        for (int64_t d = 0; d < D; ++d) dst[d] += static_cast<A>(src[d]);
      });
    });
    T* out = static_cast<T*>(dweight.data_ptr());
    if (accumulate)
      for (int64_t i = 0; i < V * D; ++i) {
        const A sum = static_cast<A>(T(acc[static_cast<size_t>(i)]));  // rounded as a dweight of its own
        out[i] = T(static_cast<A>(out[i]) + sum);
      }
    else
      for (int64_t i = 0; i < V * D; ++i) out[i] = T(acc[static_cast<size_t>(i)]);
  });
}

TANDEM_REGISTER_KERNEL(embedding_forward, DeviceKind::CPU, cpu_embedding_forward);
TANDEM_REGISTER_KERNEL(embedding_backward, DeviceKind::CPU, cpu_embedding_backward);

}  // namespace

void fail_embedding_index(int64_t v, int64_t i, int64_t V) {
  TANDEM_FAIL(Value, "embedding: index {} at position {} is out of range for a table of {} rows", v, i, V);
}

void check_embedding_indices(const Tensor& indices, int64_t V) {
  dispatch_index_type(indices, "embedding: indices", [&](auto itag) { for_each_index<decltype(itag)>(indices, V, [](int64_t, int64_t) {}); });
}
}  // namespace tandem::kernels
