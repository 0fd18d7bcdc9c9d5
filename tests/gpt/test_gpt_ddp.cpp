// The GPT under DistributedDataParallel (mpirun, 1-2 ranks): N ranks with batch b each train the
// same weights as one process with batch N*b (to 1e-5), and the tied wte is one gradient in one
// bucket, not two.
#include <gtest/gtest.h>

#include "apps/common/gpt_train.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/parallel/ddp.h"
#include "runtime/data/text_corpus.h"
#include "tests/parallel/parallel_util.h"

using namespace tandem;
using nn::GPT;
using nn::GPTConfig;
using nn::parallel::DistributedDataParallel;

namespace {

std::vector<uint8_t> text() {
  const std::string s = "It is a truth universally acknowledged, that a single man in possession of a good "
                        "fortune, must be in want of a wife.\n%\nAll happy families are alike.\n%\n";
  std::vector<uint8_t> b;
  for (int i = 0; i < 20; ++i) b.insert(b.end(), s.begin(), s.end());
  return b;
}

// `steps` AdamW steps (decay groups as tandem-train, clipping at 1) of `model` (the DDP wrapper or
// a bare GPT) on the windows of `rank` of `world` with `batch` windows each.
void train_steps(nn::Module& model, int world, int rank, int64_t batch, int steps) {
  app::TrainConfig cfg;
  cfg.optimizer.type = nn::config::OptimizerType::AdamW;
  cfg.optimizer.learning_rate = 3e-3;
  cfg.optimizer.weight_decay = 0.1;
  // The key bias's gradient is zero in exact arithmetic (softmax ignores a constant per query), so
  // it is rounding noise (~1e-10) that Adam would scale up to lr-sized steps at eps 1e-8 and that
  // differs with the reduction order; eps 1e-6 keeps such steps below the comparison's tolerance.
  cfg.optimizer.eps = 1e-6;
  auto opt = app::make_gpt_optimizer(cfg, model.parameters());
  data::TextWindowsOptions wo;
  wo.batch_size = batch;
  wo.context = 16;
  wo.world_size = world;
  wo.rank = rank;
  wo.seed = 5;
  data::TextWindows windows(text(), wo);
  for (int s = 0; s < steps; ++s) {
    data::Batch b = windows.batch(s);
    opt->zero_grad();
    Tensor logits = model(b.x);
    ops::cross_entropy(ops::reshape(logits, {-1, logits.size(2)}), ops::reshape(b.y, {-1})).backward();
    nn::clip_grad_norm(model.parameters(), 1.0);
    opt->step();
  }
}

}  // namespace

TEST(GptDdp, NRanksEqualOneRankWithTheGlobalBatch) {
  auto comm = tandem::testing::world();
  const int n = comm->size();
  Generator g1(11), g2(11);
  auto model = std::make_shared<GPT>(GPTConfig::preset("tiny"), g1);
  auto reference = std::make_shared<GPT>(GPTConfig::preset("tiny"), g2);
  DistributedDataParallel ddp(model, comm);
  train_steps(ddp, n, comm->rank(), 2, 4);
  train_steps(*reference, 1, 0, 2 * n, 4);
  tandem::testing::expect_same_parameters(*model, *reference, 1e-5, "rank " + std::to_string(comm->rank()));
}

TEST(GptDdp, TiedWeightIsBucketedOnce) {
  auto comm = tandem::testing::world();
  Generator gen(12);
  auto model = std::make_shared<GPT>(GPTConfig::preset("tiny"), gen);
  DistributedDataParallel ddp(model, comm);
  size_t names = 0, wte = 0;
  for (const auto& bucket : ddp.bucket_names())
    for (const auto& name : bucket) ++names, wte += name == "wte.weight";
  EXPECT_EQ(wte, 1u);
  EXPECT_EQ(names, model->parameters().size());
  // One backward reduces it once: its gradient is the mean of the ranks' (same batch here, so equal
  // to the local one), not twice that.
  Tensor x = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  Tensor logits = ddp(x);
  ops::cross_entropy(ops::reshape(logits, {-1, 256}), ops::reshape(x, {-1})).backward();
  Generator g2(12);
  GPT local(GPTConfig::preset("tiny"), g2);
  Tensor l2 = local(x);
  ops::cross_entropy(ops::reshape(l2, {-1, 256}), ops::reshape(x, {-1})).backward();
  Tensor expected;
  for (auto& [name, p] : local.named_parameters())
    if (name == "wte.weight") expected = p.grad();
  for (auto& [name, p] : model->named_parameters())
    if (name == "wte.weight") tandem::testing::expect_close(p.grad(), expected, 1e-5, "wte gradient");
}
