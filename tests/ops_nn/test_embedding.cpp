// embedding: gather against PyTorch with repeated indices (deterministic scatter-add backward),
// gradcheck, errors.
#include <gtest/gtest.h>

#include "runtime/ops.h"
#include "tests/ops_nn/helpers.h"

namespace tandem::testing {
namespace r = ref::ops_b;

TEST(Embedding, MatchesTorchWithRepeatedIndices) {
  for (DType it : {DType::i64, DType::i32}) {
    Tensor idx = ref(r::emb_idx, {2, 3}, it);
    Tensor w = ref(r::emb_w, {6, 4}, DType::f32, true);
    Tensor y = ops::embedding(idx, w);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    expect_close(y, r::emb_y, 1e-7, 1e-7);  // f32 rows of the f64 reference
    expect_close(grads_of(y, {w}, r::emb_r)[0], r::emb_gw, 1e-6, 1e-6);
  }
}

TEST(Embedding, Gradcheck) {
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 0, 2, 2, 1}, {5});
  Tensor w = random_leaf({4, 3}, 41);
  expect_gradcheck([&](const std::vector<Tensor>& t) { return ops::embedding(idx, t[0]); }, {w});
}

TEST(Embedding, Errors) {
  Tensor w = Tensor::zeros({4, 3});
  expect_value_error([&] { ops::embedding(Tensor::from_vector(std::vector<int64_t>{1, 4}, {2}), w); },
                     {"index 4", "4 rows"});
  expect_value_error([&] { ops::embedding(Tensor::zeros({2}), w); }, {"i32 or i64"});
  expect_value_error([&] { ops::embedding(Tensor::zeros({2}, DType::i64), Tensor::zeros({4})); }, {"[V, D]"});
}

}  // namespace tandem::testing
