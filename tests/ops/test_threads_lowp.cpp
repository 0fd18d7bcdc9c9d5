// Results independent of the OpenMP thread count (bitwise), and f16/bf16 through reductions,
// softmax backward and shape ops.
#include <omp.h>

#include "tests/ops/ops_test_util.h"

namespace tandem {
namespace {
using namespace testing;

TEST(Threads, ResultsDoNotDependOnThreadCount) {
  Generator gen(3);
  Tensor big = rand_uniform({300, 1001}, -2, 2, gen);  // above every kernel's parallel threshold
  Tensor bias = rand_uniform({1001}, -1, 1, gen);
  Tensor target = Tensor::from_vector(std::vector<int64_t>(300, 7), {300});
  auto run = [&] {
    Tensor x = leaf(big);
    Tensor y = ops::softmax(ops::gelu(x + bias), 1) * 3.0;
    Tensor loss = ops::add(ops::sum(ops::log_softmax(y, 0)), ops::cross_entropy(y, target));
    loss.backward();
    return std::vector<Tensor>{loss, ops::sum(big, 0), ops::mean(big, 1), ops::permute(big, {1, 0}), x.grad()};
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> one = run();
  omp_set_num_threads(2);
  std::vector<Tensor> two = run();
  omp_set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "result " << i;
}

TEST(LowPrecision, ReductionsSoftmaxAndShapes) {
  Generator gen(4);
  Tensor x32 = rand_uniform({6, 7}, -2, 2, gen);
  for (DType dt : {DType::f16, DType::bf16}) {
    const double tol = dt == DType::f16 ? 3e-3 : 2e-2;
    Tensor x = leaf(ops::cast(x32, dt));
    Tensor xr = ops::cast(x.detach(), DType::f32);  // the f32 values of the rounded input
    EXPECT_EQ(ops::sum(x, 1).dtype(), dt);
    expect_close(ops::cast(ops::sum(x, 1), DType::f32), ops::sum(xr, 1), tol * 4, tol);
    expect_close(ops::cast(ops::mean(x), DType::f32), ops::mean(xr), tol, tol);
    EXPECT_EQ(ops::argmax(x, 1).to_vector<int64_t>(), ops::argmax(xr, 1).to_vector<int64_t>());
    Tensor p = ops::permute(x, {1, 0});
    EXPECT_EQ(p.dtype(), dt);
    expect_close(ops::cast(p, DType::f32), ops::permute(xr, {1, 0}), 0, 0);
    // softmax backward in low precision against f32.
    Tensor w = rand_uniform({6, 7}, -1, 1, gen);
    ops::sum(ops::mul(ops::cast(ops::softmax(x, 1), DType::f32), w)).backward();
    Tensor xr_leaf = leaf(xr);
    ops::sum(ops::mul(ops::softmax(xr_leaf, 1), w)).backward();
    EXPECT_EQ(x.grad().dtype(), dt);
    expect_close(ops::cast(x.grad(), DType::f32), xr_leaf.grad(), tol, 5 * tol);
  }
}

}  // namespace
}  // namespace tandem
