// SyncBatchNorm under mpirun: N ranks on row shards of a batch equal BatchNorm on one process over
// the whole batch (output, input gradient, summed weight/bias gradients, running statistics), also
// when a rank's shard is empty; plus convert_sync_batchnorm.
#include "nn/parallel/sync_batch_norm.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::SyncBatchNorm;

constexpr int64_t kC = 3;

// Rows of rank r: `sizes[r]` rows starting after those of the lower ranks.
std::pair<int64_t, int64_t> rows_of(const std::vector<int64_t>& sizes, int r) {
  int64_t start = 0;
  for (int k = 0; k < r; ++k) start += sizes[static_cast<size_t>(k)];
  return {start, sizes[static_cast<size_t>(r)]};
}

void check_against_batch_norm(const std::vector<int64_t>& sizes, const Shape& sample_shape) {
  auto comm = world();
  const int rank = comm->rank();
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  Shape full = {total};
  full.insert(full.end(), sample_shape.begin(), sample_shape.end());
  Generator gen(42);
  Tensor x_all = rand_normal(full, 0.5, 2.0, gen);
  Tensor g_all = rand_normal(full, 0.0, 1.0, gen);  // loss = sum(y * g): dy = g, the same on every layout
  Tensor w0 = rand_uniform({kC}, 0.5, 1.5, gen), b0 = rand_uniform({kC}, -0.5, 0.5, gen);

  nn::BatchNorm2d ref_bn(kC);
  SyncBatchNorm sync_bn(kC, comm);
  for (auto* m : std::vector<nn::Module*>{&ref_bn, &sync_bn}) {
    m->param("weight").copy_(w0);
    m->param("bias").copy_(b0);
  }
  auto [start, len] = rows_of(sizes, rank);
  for (int step = 0; step < 2; ++step) {  // two steps: running stats move twice
    Tensor xr = x_all.clone().set_requires_grad(true);
    Tensor yr = ref_bn.forward(xr);
    ops::sum(yr * g_all).backward();

    Tensor xs = x_all.narrow0(start, len).clone().set_requires_grad(true);
    Tensor ys = sync_bn.forward(xs);
    ops::sum(ys * g_all.narrow0(start, len).clone()).backward();

    if (len > 0) {
      expect_close(ys, yr.narrow0(start, len), 1e-5, "output", 1e-5);
      expect_close(xs.grad(), xr.grad().narrow0(start, len), 1e-4, "input gradient", 1e-5);
    } else {
      EXPECT_EQ(ys.numel(), 0);
    }
    // The weight/bias gradients are the rank's own: their sum over ranks is the whole batch's.
    for (const char* name : {"weight", "bias"}) {
      Tensor g = sync_bn.param(name).grad().clone();
      comm->allreduce(g.data_ptr(), g.numel(), g.dtype(), comm::ReduceOp::Sum)->wait();
      expect_close(g, ref_bn.param(name).grad(), 1e-4, std::string("summed grad of ") + name, 1e-5);
    }
    expect_close(sync_bn.buffer("running_mean"), ref_bn.buffer("running_mean"), 1e-5, "running_mean");
    expect_close(sync_bn.buffer("running_var"), ref_bn.buffer("running_var"), 1e-5, "running_var");
    for (auto* m : std::vector<nn::Module*>{&ref_bn, &sync_bn}) m->zero_grad();
  }
  EXPECT_EQ(sync_bn.buffer("num_batches_tracked").item(), 2.0);

  // Eval: the running statistics, nothing exchanged.
  ref_bn.eval();
  sync_bn.eval();
  NoGradGuard no_grad;
  if (len > 0)
    expect_close(sync_bn.forward(x_all.narrow0(start, len).clone()), ref_bn.forward(x_all).narrow0(start, len), 1e-5,
                 "eval output", 1e-5);
}

TEST(SyncBatchNorm, EqualShardsMatchBatchNormOnWholeBatch) {
  const int n = world()->size();
  check_against_batch_norm(std::vector<int64_t>(static_cast<size_t>(n), 4), {kC, 5, 3});
}

TEST(SyncBatchNorm, UnequalShardsMatchBatchNorm) {
  const int n = world()->size();
  std::vector<int64_t> sizes;
  for (int r = 0; r < n; ++r) sizes.push_back(1 + 2 * r);
  check_against_batch_norm(sizes, {kC, 4, 4});
}

TEST(SyncBatchNorm, RankWithEmptyBatchTakesPart) {
  const int n = world()->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<int64_t> sizes(static_cast<size_t>(n), 3);
  sizes.back() = 0;  // the last rank has no data this step
  check_against_batch_norm(sizes, {kC, 2, 2});
}

TEST(SyncBatchNorm, TooFewValuesOverAllRanks) {
  auto comm = world();
  SyncBatchNorm bn(kC, comm);
  // One value per channel in total: rank 0 has one sample of 1x1, the others none.
  Tensor x = Tensor::zeros({comm->rank() == 0 ? 1 : 0, kC, 1, 1});
  try {
    bn.forward(x);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1 value per channel over all ranks"), std::string::npos) << e.what();
  }
}

TEST(SyncBatchNorm, ConvertReplacesBatchNormsAndSharesTensors) {
  auto comm = world();
  auto model = small_cnn(3);
  Tensor w = model->named_parameters()[2].second;  // 1.weight, the BN's
  Tensor rm = model->named_buffers()[0].second;
  auto converted = nn::parallel::convert_sync_batchnorm(model, comm);
  EXPECT_EQ(converted.get(), model.get());
  EXPECT_EQ((*model)[1].type_name(), "SyncBatchNorm");
  EXPECT_TRUE(model->named_parameters()[2].second.is_same(w));
  EXPECT_TRUE(model->named_buffers()[0].second.is_same(rm));
  // A bare BatchNorm is returned converted.
  auto bare = nn::parallel::convert_sync_batchnorm(std::make_shared<nn::BatchNorm2d>(4), comm);
  EXPECT_EQ(bare->type_name(), "SyncBatchNorm");
}

}  // namespace
}  // namespace tandem::testing
