// ops::where: the select against a loop over the broadcast indices, infinities in the branch not
// taken (a masked_fill's -inf), f64 gradchecks with each operand broadcast, integer dtypes, errors.
#include <cmath>
#include <limits>

#include "tests/ops/ops_test_util.h"

namespace tandem {
namespace {
using namespace testing;

Tensor mask(const std::vector<uint8_t>& v, const Shape& shape) { return Tensor::from_vector<uint8_t>(v, shape); }

TEST(Where, SelectsWithBroadcasting) {
  // cond [3, 1] picks whole rows; a [3, 4]; b a scalar.
  Tensor a = random_leaf({3, 4}, 61).detach(), b = Tensor::full({}, -7.0, DType::f64);
  Tensor y = ops::where(mask({1, 0, 1}, {3, 1}), a, b);
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  std::vector<double> av = a.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(yv[i * 4 + j], i == 1 ? -7.0 : av[i * 4 + j]) << i << "," << j;
  // Every operand broadcast: cond [1, 3, 1], a [2, 1, 4], b [3, 4] -> [2, 3, 4].
  Tensor c = mask({0, 1, 1}, {1, 3, 1});
  Tensor a2 = random_leaf({2, 1, 4}, 62).detach(), b2 = random_leaf({3, 4}, 63).detach();
  std::vector<double> got = ops::where(c, a2, b2).to_vector<double>(), a2v = a2.to_vector<double>(),
                      b2v = b2.to_vector<double>();
  ASSERT_EQ(got.size(), 24u);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        EXPECT_EQ(got[(n * 3 + i) * 4 + j], i > 0 ? a2v[n * 4 + j] : b2v[i * 4 + j]) << n << i << j;
}

// A causal mask: -inf above the diagonal, the scores below. The -inf never multiplies anything, so the
// scores kept are exact and their gradient is g there and 0 elsewhere (no NaN from inf * 0).
TEST(Where, InfinityInTheBranchNotTakenStaysOut) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor scores = leaf(Tensor::from_vector<float>({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  Tensor masked = ops::where(mask({1, 0, 1, 1}, {2, 2}), scores, Tensor::full({}, -inf));
  EXPECT_EQ(masked.to_vector<float>(), (std::vector<float>{1.f, -inf, 3.f, 4.f}));
  Tensor big = leaf(Tensor::from_vector<float>({inf, 5.f}, {2}));
  Tensor picked = ops::where(mask({0, 1}, {2}), big, Tensor::zeros({2}));
  EXPECT_EQ(picked.to_vector<float>(), (std::vector<float>{0.f, 5.f}));
  ops::sum(masked).backward();
  EXPECT_EQ(scores.grad().to_vector<float>(), (std::vector<float>{1.f, 0.f, 1.f, 1.f}));
  ops::sum(picked).backward();
  EXPECT_EQ(big.grad().to_vector<float>(), (std::vector<float>{0.f, 1.f}));
}

TEST(Where, GradcheckEachOperandBroadcast) {
  struct Case {
    Shape c, a, b;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {2, 3}, {2, 3}}, {{3, 1}, {3, 4}, {}}, {{1, 3, 4}, {2, 3, 4}, {3, 1}}, {{4}, {2, 1, 4}, {2, 3, 1}}};
  uint64_t seed = 70;
  for (const Case& k : cases) {
    SCOPED_TRACE(shape_str(k.c) + shape_str(k.a) + shape_str(k.b));
    std::vector<uint8_t> bits(static_cast<size_t>(shape_numel(k.c)));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint8_t>((i * 7 + seed) % 3 != 0);
    Tensor c = mask(bits, k.c), a = random_leaf(k.a, seed++), b = random_leaf(k.b, seed++);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return ops::where(c, in[0], in[1]); }, {a, b});
  }
}

TEST(Where, IntegersAndErrors) {
  Tensor a = Tensor::from_vector<int64_t>({1, 2, 3}, {3}), b = Tensor::from_vector<int64_t>({-1}, {1});
  EXPECT_EQ(ops::where(mask({1, 0, 1}, {3}), a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 3}));
  expect_value_error([&] { ops::where(Tensor::ones({3}), a, b); }, {"where", "u8", "f32"});
  expect_value_error([&] { ops::where(mask({1, 0}, {2}), a, b); }, {"where", "[2]", "[3]"});
  expect_value_error([&] { ops::where(mask({1, 0, 1}, {3}), a, Tensor::zeros({3})); }, {"where", "i64", "f32"});
}

}  // namespace
}  // namespace tandem
