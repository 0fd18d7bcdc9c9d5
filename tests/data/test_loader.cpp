// The batch loader: gathering, per-batch normalisation, layouts, batch counts, and seeded
// shuffling that depends only on (seed, epoch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "runtime/data/loader.h"
#include "runtime/error.h"

using namespace tandem;
using namespace tandem::data;

namespace {

// n images of 2x3 pixels; image i is filled with 10*i + pixel, label i % 10.
Dataset tiny_dataset(int64_t n) {
  std::vector<uint8_t> img(static_cast<size_t>(n * 6)), lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < 6; ++p) img[static_cast<size_t>(i * 6 + p)] = static_cast<uint8_t>((10 * i + p) % 256);
    lab[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 10);
  }
  Dataset ds;
  ds.images = Tensor::from_vector(img, {n, 2, 3}, DType::u8);
  ds.labels = Tensor::from_vector(lab, {n}, DType::u8);
  return ds;
}

}  // namespace

TEST(Loader, NormalisesWithFashionMnistMeanAndStd) {
  Tensor u8 = Tensor::from_vector(std::vector<uint8_t>{0, 255, 73}, {3}, DType::u8);
  auto v = normalize_images(u8, kFashionMnistMean, kFashionMnistStd).to_vector<double>();
  EXPECT_NEAR(v[0], (0.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_NEAR(v[1], (1.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_NEAR(v[2], (73.0 / 255.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_THROW(normalize_images(Tensor::zeros({2}), 0.5, 0.5), ValueError);
}

TEST(Loader, SequentialBatchesFlatAndImage) {
  Dataset ds = tiny_dataset(10);
  LoaderOptions opt;
  opt.batch_size = 4;
  BatchLoader flat(ds, std::make_shared<SequentialSampler>(10), opt);
  flat.set_epoch(0);
  ASSERT_EQ(flat.num_batches(), 3);
  Batch b = flat.batch(2);  // the last, smaller batch: samples 8 and 9
  EXPECT_EQ(b.x.shape(), (Shape{2, 6}));
  EXPECT_EQ(b.x.dtype(), DType::f32);
  EXPECT_EQ(b.y.dtype(), DType::i64);
  EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  auto x = b.x.to_vector<double>();
  EXPECT_NEAR(x[7], (91.0 / 255 - kFashionMnistMean) / kFashionMnistStd, 1e-6);  // sample 9, pixel 1
  EXPECT_THROW(flat.batch(3), ValueError);

  opt.layout = Layout::Image;
  opt.drop_last = true;
  BatchLoader image(ds, std::make_shared<SequentialSampler>(10), opt);
  image.set_epoch(0);
  EXPECT_EQ(image.num_batches(), 2);
  EXPECT_EQ(image.num_samples(), 8);
  EXPECT_EQ(image.batch(1).x.shape(), (Shape{4, 1, 2, 3}));
}

TEST(Loader, BatchBeforeSetEpochIsAnError) {
  BatchLoader l(tiny_dataset(4), std::make_shared<SequentialSampler>(4), LoaderOptions{});
  EXPECT_THROW(l.batch(0), ValueError);
}

TEST(Sampler, RandomIsAPermutationDeterminedBySeedAndEpoch) {
  RandomSampler a(1000, 42), b(1000, 42), c(1000, 43);
  auto e0 = a.indices(0);
  EXPECT_EQ(e0, b.indices(0));      // same seed, same epoch: same order
  EXPECT_EQ(e0, a.indices(0));      // asking twice changes nothing (no hidden state)
  EXPECT_NE(e0, a.indices(1));      // a new order every epoch
  EXPECT_NE(e0, c.indices(0));      // and per seed
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(e0, iota);
}

TEST(Loader, ShuffledBatchesAreReproducible) {
  Dataset ds = tiny_dataset(25);
  LoaderOptions opt;
  opt.batch_size = 8;
  BatchLoader l1(ds, std::make_shared<RandomSampler>(25, 7), opt);
  BatchLoader l2(ds, std::make_shared<RandomSampler>(25, 7), opt);
  l1.set_epoch(3);
  l2.set_epoch(3);
  std::vector<int64_t> seen;
  for (int64_t i = 0; i < l1.num_batches(); ++i) {
    Batch b1 = l1.batch(i), b2 = l2.batch(i);
    EXPECT_EQ(b1.x.to_vector<float>(), b2.x.to_vector<float>());
    auto y = b1.y.to_vector<int64_t>();
    EXPECT_EQ(y, b2.y.to_vector<int64_t>());
    // Each image still carries its own label: pixel 0 of sample s is 10*s (mod 256).
    auto x = b1.x.to_vector<double>();
    for (size_t r = 0; r < y.size(); ++r) {
      double px = std::round((x[r * 6] * kFashionMnistStd + kFashionMnistMean) * 255);
      int64_t s = -1;
      for (int64_t k = 0; k < 25; ++k)
        if ((10 * k) % 256 == px) s = k;
      ASSERT_GE(s, 0);
      EXPECT_EQ(y[r], s % 10);
      seen.push_back(s);
    }
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> iota(25);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(seen, iota);  // every sample exactly once per epoch
}

// A sampler returning a fixed shard: the loader takes any index list (a distributed sampler's).
TEST(Loader, AcceptsAnyIndexList) {
  struct Shard : Sampler {
    std::vector<int64_t> indices(int64_t) const override { return {5, 1, 3}; }
  };
  BatchLoader l(tiny_dataset(6), std::make_shared<Shard>(), LoaderOptions{});
  l.set_epoch(0);
  ASSERT_EQ(l.num_batches(), 1);
  EXPECT_EQ(l.batch(0).y.to_vector<int64_t>(), (std::vector<int64_t>{5, 1, 3}));
}
