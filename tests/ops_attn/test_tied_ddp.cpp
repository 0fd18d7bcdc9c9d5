// DDP with a tied embedding / output projection under mpirun: N ranks on shards of a global batch
// end with the parameters of one process training on all of it, and the shared table is in one
// bucket slot (reduced once: reducing it twice would double its update).
#include <algorithm>

#include "nn/optim.h"
#include "nn/parallel/ddp.h"
#include "tests/ops_attn/tied_lm.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DistributedDataParallel;

TEST(TiedDDP, MatchesSingleProcessAndReducesTheTableOnce) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  constexpr int64_t kVocab = 17, kDim = 6, kBatch = 24;  // kBatch divisible by 1..4 ranks
  auto ref = std::make_shared<SharedTableLM>(kVocab, kDim, 3);
  auto model = std::make_shared<SharedTableLM>(kVocab, kDim, 3 + static_cast<uint64_t>(rank));
  DistributedDataParallel ddp(model, comm);

  std::vector<std::string> reduced;
  for (const auto& bucket : ddp.bucket_names()) reduced.insert(reduced.end(), bucket.begin(), bucket.end());
  std::sort(reduced.begin(), reduced.end());
  EXPECT_EQ(reduced, (std::vector<std::string>{"emb.weight", "mid.weight"}));

  nn::SGDOptions o;
  o.lr = 0.2;
  o.momentum = 0.9;
  nn::SGD opt_ref(ref->parameters(), o), opt(ddp.parameters(), o);
  for (int step = 0; step < 3; ++step) {
    Tensor ids = token_ids(kBatch, kVocab, 100 + static_cast<uint64_t>(step));
    Tensor target = token_ids(kBatch, kVocab, 200 + static_cast<uint64_t>(step));
    opt_ref.zero_grad();
    ops::cross_entropy(ref->forward(ids), target).backward();
    opt_ref.step();

    const int64_t rows = kBatch / n;
    opt.zero_grad();
    ops::cross_entropy(ddp.forward(ids.narrow0(rank * rows, rows).clone()), target.narrow0(rank * rows, rows).clone())
        .backward();
    ddp.finalize();
    opt.step();
  }
  expect_same_parameters(*model, *ref, 1e-5, "tied model after DDP training");
  // The tie survives training: the head still holds the embedding's tensor.
  EXPECT_TRUE(model->children()[0].second->param("weight").is_same(model->children()[2].second->param("weight")));
}

}  // namespace
}  // namespace tandem::testing
