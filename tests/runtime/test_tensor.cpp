// Tensor basics: factories, views, copies, conversions, devices and their errors.
#include <algorithm>

#include <gtest/gtest.h>

#include "runtime/device.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

using namespace tandem;

TEST(Tensor, FactoriesAndMetadata) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_EQ(Tensor::full({2}, 2.5).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(Tensor::arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::scalar(3.0).item(), 3.0);
  EXPECT_THROW(t.size(2), ValueError);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ValueError);
}

TEST(Tensor, DtypeConversionsRoundTrip) {
  std::vector<float> v{1.5f, -2.0f, 0.25f};
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor t = Tensor::from_vector(v, {3}, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.to_vector<float>(), v) << dtype_name(d);
  }
  Tensor i = Tensor::from_vector(std::vector<int64_t>{7, -3}, {2}, DType::i32);
  EXPECT_EQ(i.to_vector<double>(), (std::vector<double>{7, -3}));
  Tensor h = Tensor::empty({3}, DType::f16);
  h.copy_(Tensor::from_vector(v, {3}));
  EXPECT_EQ(h.to_vector<float>(), v);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor v = t.view({-1});
  EXPECT_EQ(v.shape(), (Shape{6}));
  Tensor rows = t.narrow0(1, 2);
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  rows.fill_(9);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 9, 9, 9, 9}));
  EXPECT_THROW(t.view({4, 2}), ValueError);
  EXPECT_THROW(t.narrow0(2, 2), ValueError);
  Tensor c = t.clone();
  c.fill_(0);
  EXPECT_EQ(t.to_vector<float>()[0], 0.0f);
  EXPECT_EQ(t.to_vector<float>()[2], 9.0f);
}

TEST(Device, ParsesAndRejects) {
  EXPECT_EQ(Device::parse("cpu"), Device(DeviceKind::CPU, 0));
  EXPECT_EQ(Device::parse("cuda:3"), Device(DeviceKind::CUDA, 3));
  EXPECT_EQ(Device::parse("cpu:1").str(), "cpu:1");
  EXPECT_THROW(Device::parse("tpu:0"), ValueError);
  EXPECT_THROW(Device::parse("cpu:x"), ValueError);
}

// Large draws split over the OpenMP threads: element i is the same whatever the draw's size (the
// threads' shares move with it) and the same as a small draw's, made on the calling thread alone.
TEST(Random, LargeDrawsDependOnTheIndexAlone) {
  const int64_t n = (int64_t(1) << 17) + 3;
  for (bool normal : {false, true}) {
    auto draw = [&](int64_t size) {
      Generator g(7);
      return (normal ? rand_normal({size}, 0, 1, g, DType::f64) : rand_uniform({size}, 0, 1, g, DType::f64))
          .to_vector<double>();
    };
    const std::vector<double> big = draw(n), bigger = draw(n + 1001), small = draw(10);
    EXPECT_TRUE(std::equal(big.begin(), big.end(), bigger.begin())) << (normal ? "normal" : "uniform");
    EXPECT_TRUE(std::equal(small.begin(), small.end(), big.begin())) << (normal ? "normal" : "uniform");
    EXPECT_NE(big[0], big[static_cast<size_t>(n - 1)]);
  }
}

TEST(Random, SameSeedSameNumbers) {
  Generator a(5), b(5);
  EXPECT_EQ(rand_uniform({10}, 0, 1, a).to_vector<float>(), rand_uniform({10}, 0, 1, b).to_vector<float>());
  Generator c(6);
  EXPECT_NE(rand_uniform({10}, 0, 1, a).to_vector<float>(), rand_uniform({10}, 0, 1, c).to_vector<float>());
  Generator p(1);
  auto perm = rand_permutation(100, p);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
}
