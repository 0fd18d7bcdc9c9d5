// checkpoint_sequential over the children of a Sequential.
#include "nn/checkpoint_sequential.h"

#include "runtime/autograd.h"

namespace tandem::nn {

Tensor checkpoint_sequential(Sequential& seq, int segments, const Tensor& x, Generator& gen) {
  const size_t n = seq.size();
  TANDEM_CHECK(segments >= 1, "checkpoint_sequential: segments must be >= 1, got {}", segments);
  if (!GradMode::is_enabled() || n == 0) return seq.forward(x);
  const size_t per = (n + static_cast<size_t>(segments) - 1) / static_cast<size_t>(segments);
  Tensor h = x;
  size_t start = 0;
  for (; start + per < n; start += per) {
    const size_t end = start + per;
    CheckpointOptions opt;
    opt.generator = &gen;
    for (size_t i = start; i < end; ++i)
      for (auto& [name, b] : seq[i].named_buffers()) opt.preserve.push_back(b);
    Sequential* s = &seq;
    h = checkpoint(
        [s, start, end](const Tensor& in) {
          Tensor t = in;
          for (size_t i = start; i < end; ++i) t = (*s)[i].forward(t);
          return t;
        },
        h, opt);
  }
  for (size_t i = start; i < n; ++i) h = seq[i].forward(h);
  return h;
}

}  // namespace tandem::nn
