// embedding forward and backward (device or host indices, overwriting or accumulating) on the CUDA
// backend vs the CPU, bit for bit, and a bad index.
#include <string>
#include <tuple>

#include "runtime/backend/embedding.h"
#include "runtime/ops.h"
#include "tests/cuda/backend_test.h"

namespace tandem::testing {
namespace {

class EmbeddingOps : public BackendTest {};

TEST_P(EmbeddingOps, EmbeddingForwardBackwardMatchCpuExactly) {
  for (DType it : {DType::i32, DType::i64})
    for (auto [n, V, D] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 3, 4}, {1, 1, 1}, {40, 7, 33}, {300, 50, 5}}) {
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = (i * i + 3) % V;  // repeats
      Tensor indices = Tensor::from_vector(idx, {n}, it);
      Tensor weight = random_tensor({V, D}, DType::f32, 91), dy = random_tensor({n, D}, DType::f32, 92);
      Tensor want = Tensor::empty({n, D}), got = Tensor::empty({n, D}, DType::f32, dev());
      kernels::embedding_forward(kCPU)(indices, weight, want, false);
      kernels::embedding_forward(dev())(indices.to(dev()), weight.to(dev()), got, false);
      expect_close(got, want, 0, "embedding forward");
      Tensor trusted = Tensor::empty({n, D}, DType::f32, dev());  // indices the caller checked
      kernels::embedding_forward(dev())(indices.to(dev()), weight.to(dev()), trusted, true);
      expect_close(trusted, want, 0, "embedding forward, checked indices");
      Tensor dw = Tensor::empty({V, D}), ddw = Tensor::empty({V, D}, DType::f32, dev());
      kernels::embedding_backward(kCPU)(indices, dy, dw, false);
      kernels::embedding_backward(dev())(indices.to(dev()), dy.to(dev()), ddw, false);
      expect_close(ddw, dw, 0, "embedding backward (same order of additions)");
      Tensor hdw = Tensor::empty({V, D}, DType::f32, dev());  // the indices on the host (the op's way)
      kernels::embedding_backward(dev())(indices, dy.to(dev()), hdw, false);
      expect_close(hdw, dw, 0, "embedding backward, host indices");
      // accumulate: added to what the table's gradient holds, as the sum made apart and then added.
      Tensor prior = random_tensor({V, D}, DType::f32, 93);
      Tensor acc = prior.clone(), dacc = prior.to(dev());
      kernels::embedding_backward(kCPU)(indices, dy, acc, true);
      kernels::embedding_backward(dev())(indices.to(dev()), dy.to(dev()), dacc, true);
      Tensor apart = ops::add(prior, dw);
      expect_close(acc, apart, 0, "embedding backward accumulate (CPU)");
      expect_close(dacc, apart, 0, "embedding backward accumulate");
    }
  Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 5}, {2}).to(dev());
  Tensor out = Tensor::empty({2, 3}, DType::f32, dev());
  EXPECT_THROW(kernels::embedding_forward(dev())(bad, Tensor::zeros({4, 3}, DType::f32, dev()), out, false),
               ValueError);
}

// The op names the first bad index whichever way it checks: the kernel's (no gradient wanted) or
// on the host copy its backward keeps (a table that requires grad), for i32 and i64 indices.
TEST_P(EmbeddingOps, EmbeddingOpReportsTheFirstBadIndex) {
  for (DType it : {DType::i32, DType::i64})
    for (bool grad : {false, true}) {
      Tensor w = Tensor::zeros({4, 3}, DType::f32, dev());
      if (grad) w.set_requires_grad();
      Tensor idx = Tensor::from_vector(std::vector<int64_t>{0, 3, 9, -1, 2}, {5}, it).to(dev());
      try {
        ops::embedding(idx, w);
        ADD_FAILURE() << "no error for index 9";
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("index 9 at position 2 is out of range for a table of 4 rows"),
                  std::string::npos)
            << e.what();
      }
    }
}

// The op on the device: its backward plans from the host copy of the indices taken in the forward
// and adds into the table's .grad (made at the first backward, added to at the second): the CPU's.
TEST_P(EmbeddingOps, EmbeddingOpBackwardIntoGradMatchesCpu) {
  auto run = [&](Device d) {
    Tensor w = random_tensor({11, 6}, DType::f32, 94).to(d).set_requires_grad();
    Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 0, 3, 10, 7, 3}, {2, 3}).to(d);
    Tensor dy = random_tensor({2, 3, 6}, DType::f32, 95).to(d);
    for (int step = 0; step < 2; ++step) ops::embedding(idx, w).backward(dy);
    return w.grad();
  };
  expect_close(run(dev()), run(kCPU), 0, "embedding op: the table's .grad after two backwards");
}

TANDEM_BACKEND_SUITE(EmbeddingOps);

}  // namespace
}  // namespace tandem::testing
