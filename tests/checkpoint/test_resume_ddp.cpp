// Resume under DDP on 2 ranks (in-process local group, one thread per rank): stop after step k,
// rank 0 saves, every rank rebuilds from scratch, loads and continues; the weights at step n are
// bitwise those of the 2-rank run that never stopped. Each rank's dropout has its own generator
// (seed 100 + rank): the checkpoint restores the shared Philox offset, ranks keep their seeds.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/distributed_sampler.h"
#include "nn/training_state.h"
#include "runtime/autocast.h"
#include "runtime/ops.h"
#include "tests/checkpoint/temp_dir.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
constexpr int kRanks = 2;
constexpr int64_t kData = 64, kGlobal = 8, kLocal = kGlobal / kRanks, kPerEpoch = kData / kGlobal;

struct Rank {
  Generator dropout_gen;
  std::shared_ptr<Sequential> inner;
  std::shared_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<Adam> opt;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<EMA> ema;
  Rank(int rank, uint64_t init_seed, std::shared_ptr<comm::Communicator> comm) : dropout_gen(100 + rank) {
    Generator g(init_seed + rank);  // different on each rank: DDP broadcasts rank 0's
    inner = std::make_shared<Sequential>();
    inner->emplace_back<Linear>(8, 16, true, g);
    inner->emplace_back<ReLU>();
    inner->emplace_back<Dropout>(0.25, dropout_gen);
    inner->emplace_back<Linear>(16, 4, true, g);
    ddp = std::make_shared<parallel::DistributedDataParallel>(inner, comm);
    AdamOptions o;
    o.lr = 1e-2;
    opt = std::make_unique<Adam>(ddp->parameters(), o);
    scaler = std::make_unique<GradScaler>(GradScalerOptions{1024.0, 2.0, 0.5, 3, true}, comm.get());
    ema = std::make_unique<EMA>(*inner, EMAOptions{0.9, 1});
  }
  TrainComponents components() { return {inner.get(), opt.get(), scaler.get(), nullptr, ema.get(), &dropout_gen}; }
};

void train(Rank& r, int rank, int64_t from, int64_t to) {
  Generator dg(99);
  std::vector<float> x = rand_uniform({kData, 8}, -1, 1, dg).to_vector<float>();
  std::vector<double> yv = rand_uniform({kData}, 0, 4, dg).to_vector<double>();
  parallel::DistributedSampler sampler(kData, kRanks, rank, {true, 5, false});
  for (int64_t step = from; step < to; ++step) {
    const int64_t epoch = step / kPerEpoch, local_pos = (step % kPerEpoch) * kLocal;
    std::vector<int64_t> idx = sampler.indices(epoch);
    std::vector<float> xb;
    std::vector<int64_t> yb;
    for (int64_t i = local_pos; i < local_pos + kLocal; ++i) {
      const int64_t k = idx[static_cast<size_t>(i)];
      xb.insert(xb.end(), x.begin() + k * 8, x.begin() + (k + 1) * 8);
      yb.push_back(static_cast<int64_t>(yv[static_cast<size_t>(k)]));
    }
    Tensor loss;
    {
      AutocastGuard ac(DType::f16);
      loss = ops::cross_entropy(r.ddp->forward(Tensor::from_vector(xb, {kLocal, 8})), Tensor::from_vector(yb, {kLocal}));
    }
    r.scaler->scale(loss).backward();
    // One rank overflows now and then: the flag is all-reduced, both ranks skip.
    if (step % 5 == 2 && rank == 1) r.inner->parameters()[0].grad().fill_(std::numeric_limits<double>::infinity());
    r.scaler->step(*r.opt);
    r.scaler->update();
    r.ema->update(*r.inner);
    r.opt->zero_grad();
  }
}

template <class F>
void on_ranks(F&& f) {
  auto group = comm::make_local_group(kRanks);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRanks);
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r, group[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}
}  // namespace

TEST(ResumeDDP, TwoRanksBitwiseAsIfNeverStopped) {
  const int64_t k = 7, n = 13;
  NamedTensors uninterrupted[kRanks], resumed[kRanks], ema_a[kRanks], ema_c[kRanks];
  on_ranks([&](int rank, std::shared_ptr<comm::Communicator> comm) {
    Rank a(rank, 1, comm);
    train(a, rank, 0, n);
    for (auto& [name, t] : a.inner->state_dict()) uninterrupted[rank].emplace_back(name, t.clone());
    ema_a[rank] = a.ema->state_tensors();
  });
  TempDir dir;
  on_ranks([&](int rank, std::shared_ptr<comm::Communicator> comm) {
    Rank b(rank, 1, comm);
    train(b, rank, 0, k);
    TrainProgress p;
    p.step = k;
    p.epoch = k / kPerEpoch;
    p.sampler_position = (k % kPerEpoch) * kGlobal;
    p.global_batch = kGlobal;
    p.world_size = kRanks;
    if (rank == 0) save_training_state(dir.path, b.components(), p);
    comm->barrier()->wait();
  });
  on_ranks([&](int rank, std::shared_ptr<comm::Communicator> comm) {
    Rank c(rank, 2, comm);  // other initial weights: the checkpoint must replace them
    TrainProgress q = load_training_state(dir.path, c.components(), kGlobal);
    // The loaded position gives each rank its place in its shard.
    ASSERT_EQ(q.sampler_position % kGlobal, 0);
    ASSERT_EQ(q.epoch * kPerEpoch + q.sampler_position / kGlobal, k);
    train(c, rank, q.step, n);
    for (auto& [name, t] : c.inner->state_dict()) resumed[rank].emplace_back(name, t.clone());
    ema_c[rank] = c.ema->state_tensors();
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(uninterrupted[r].size(), resumed[r].size());
    for (size_t i = 0; i < resumed[r].size(); ++i) {
      const Tensor &a = uninterrupted[r][i].second, &c = resumed[r][i].second;
      EXPECT_EQ(std::memcmp(a.data_ptr(), c.data_ptr(), a.nbytes()), 0) << "rank " << r << " " << resumed[r][i].first;
      const Tensor &ea = ema_a[r][i].second, &ec = ema_c[r][i].second;
      EXPECT_EQ(std::memcmp(ea.data_ptr(), ec.data_ptr(), ea.nbytes()), 0) << "ema rank " << r;
    }
  }
  // Ranks agree with each other too.
  for (size_t i = 0; i < resumed[0].size(); ++i)
    EXPECT_EQ(std::memcmp(resumed[0][i].second.data_ptr(), resumed[1][i].second.data_ptr(),
                          resumed[0][i].second.nbytes()), 0);
}
