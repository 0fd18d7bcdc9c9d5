// compute_bucket_assignment: reverse order, the small first bucket then the cap, one dtype per
// bucket, an oversized tensor closing the bucket it joins (as PyTorch), and a deterministic order.
#include <gtest/gtest.h>

#include "nn/parallel/reducer.h"

namespace tandem::testing {
namespace {

using nn::parallel::compute_bucket_assignment;

std::vector<size_t> reversed(size_t n) {
  std::vector<size_t> o;
  for (size_t i = n; i-- > 0;) o.push_back(i);
  return o;
}

TEST(Buckets, FirstBucketSmallThenCap) {
  // 6 tensors of 100 floats (400 B); first bucket 800 B, then 1600 B.
  std::vector<Tensor> t(6, Tensor());
  for (auto& x : t) x = Tensor::zeros({100});
  auto b = compute_bucket_assignment(t, reversed(6), {800, 1600});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{5, 4}));
  EXPECT_EQ(b[1], (std::vector<size_t>{3, 2, 1, 0}));
}

TEST(Buckets, OversizedTensorClosesTheBucketItJoins) {
  std::vector<Tensor> t = {Tensor::zeros({10}), Tensor::zeros({1000}), Tensor::zeros({10}), Tensor::zeros({10})};
  auto b = compute_bucket_assignment(t, reversed(4), {100, 200});
  // 3, 2 (80 B) then 1 (4000 B) passes the first limit: 3, 2, 1 | 0
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(b[1], (std::vector<size_t>{0}));
}

TEST(Buckets, SmallTensorsMayPassTheCap) {
  // 150-float tensors (600 B) under a 1000 B cap: a bucket closes once it holds >= 1000 B.
  std::vector<Tensor> t = {Tensor::zeros({150}), Tensor::zeros({150}), Tensor::zeros({150})};
  auto b = compute_bucket_assignment(t, reversed(3), {1000});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{2, 1}));
  EXPECT_EQ(b[1], (std::vector<size_t>{0}));
}

TEST(Buckets, MlpShapesMakeTwoBuckets) {
  // make_mlp's parameters: 0.weight [512,784], 0.bias, 2.weight [512,512] (exactly 1 MiB), 2.bias,
  // 4.weight [10,512], 4.bias. The last two layers fill the 1 MiB first bucket (its all-reduce
  // overlaps the first layer's backward); the first layer is the second bucket.
  std::vector<Tensor> t = {Tensor::zeros({512, 784}), Tensor::zeros({512}), Tensor::zeros({512, 512}),
                           Tensor::zeros({512}), Tensor::zeros({10, 512}), Tensor::zeros({10})};
  auto b = compute_bucket_assignment(t, reversed(6), {1 << 20, 25 << 20});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{5, 4, 3, 2}));
  EXPECT_EQ(b[1], (std::vector<size_t>{1, 0}));
}

TEST(Buckets, OneDtypePerBucket) {
  std::vector<Tensor> t = {Tensor::zeros({4}), Tensor::zeros({4}, DType::f64), Tensor::zeros({4}),
                           Tensor::zeros({4}, DType::f64)};
  auto b = compute_bucket_assignment(t, reversed(4), {1 << 20});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3, 1}));  // f64 bucket starts first in reverse order
  EXPECT_EQ(b[1], (std::vector<size_t>{2, 0}));
}

}  // namespace
}  // namespace tandem::testing
