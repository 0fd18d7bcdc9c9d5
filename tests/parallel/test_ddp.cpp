// DistributedDataParallel under mpirun: N ranks on shards of a global batch B end with the same
// parameters as one process training on B (SGD and Adam, gradient_as_bucket_view, many buckets,
// accumulation through no_sync, unused parameters), with bitwise-equal replicas; plus the
// construction broadcast and cross-rank metrics. Each rank computes the single-process reference.
#include <functional>

#include "train/parallel_setup.h"
#include "nn/optim.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/distributed_sampler.h"
#include "nn/parallel/metrics.h"
#include "nn/parallel/reducer.h"
#include "nn/parallel/sync_batch_norm.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;

constexpr int64_t kBatch = 72;  // divisible by 1..4 ranks times 1..3 micro-batches
constexpr double kRtol = 1e-5;

enum class Opt { SGD, Adam };

std::unique_ptr<nn::Optimizer> make_optimizer(Opt kind, const std::vector<Tensor>& params) {
  if (kind == Opt::SGD) {
    nn::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    return std::make_unique<nn::SGD>(params, o);
  }
  nn::AdamOptions o;
  o.lr = 1e-2;
  return std::make_unique<nn::Adam>(params, o);
}

// Every rank must hold bitwise the same parameters (the ring all-reduce is bitwise identical).
void expect_replicas_identical(const nn::Module& m, comm::Communicator& comm) {
  for (auto& [name, p] : m.named_parameters()) {
    Tensor mine = p.detach().clone();
    Tensor all = Tensor::empty({comm.size() * p.numel()}, p.dtype());
    comm.allgather(mine.data_ptr(), all.data_ptr(), p.numel(), p.dtype())->wait();
    auto v = all.to_vector<float>();
    for (int r = 1; r < comm.size(); ++r)
      for (int64_t i = 0; i < p.numel(); ++i)
        ASSERT_EQ(v[static_cast<size_t>(r * p.numel() + i)], v[static_cast<size_t>(i)])
            << name << "[" << i << "] differs between rank 0 and rank " << r;
  }
}

struct Case {
  Opt opt = Opt::SGD;
  DDPOptions ddp;
  int accumulation = 1;
  int steps = 4;
};

void check_equivalence(const Case& c) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  auto ref = small_mlp(7);
  auto model = small_mlp(7 + static_cast<uint64_t>(rank));  // differs until DDP broadcasts rank 0's
  DistributedDataParallel ddp(model, comm, c.ddp);
  auto opt_ref = make_optimizer(c.opt, ref->parameters());
  auto opt = make_optimizer(c.opt, ddp.parameters());
  for (int step = 0; step < c.steps; ++step) {
    Batch b = make_batch(1000 + static_cast<uint64_t>(step), {kBatch, 12}, 5);
    opt_ref->zero_grad();
    ops::cross_entropy(ref->forward(b.x), b.y).backward();
    opt_ref->step();

    opt->zero_grad();
    Batch mine = shard(b, rank, n);
    const int64_t micro = mine.x.size(0) / c.accumulation;
    for (int a = 0; a < c.accumulation; ++a) {
      Tensor x = mine.x.narrow0(a * micro, micro), y = mine.y.narrow0(a * micro, micro);
      auto micro_step = [&] { (ops::cross_entropy(ddp.forward(x), y) * (1.0 / c.accumulation)).backward(); };
      if (a + 1 < c.accumulation) {
        auto no_sync = ddp.no_sync();
        micro_step();
      } else {
        micro_step();
      }
    }
    ddp.finalize();
    opt->step();
  }
  expect_same_parameters(*model, *ref, kRtol, "after DDP training");
  expect_replicas_identical(*model, *comm);
}

TEST(DDP, BroadcastsRankZeroWeightsAtConstruction) {
  auto comm = world();
  auto model = small_mlp(100 + static_cast<uint64_t>(comm->rank()));
  DistributedDataParallel ddp(model, comm);
  auto ref = small_mlp(100);
  expect_same_parameters(*model, *ref, 0.0, "after construction");
}

TEST(DDP, SgdMatchesSingleProcess) { check_equivalence({Opt::SGD, {}, 1, 4}); }

TEST(DDP, AdamMatchesSingleProcess) { check_equivalence({Opt::Adam, {}, 1, 4}); }

TEST(DDP, GradientAsBucketViewSgd) {
  Case c{Opt::SGD, {}, 1, 4};
  c.ddp.gradient_as_bucket_view = true;
  check_equivalence(c);
}

TEST(DDP, GradientAsBucketViewAdamManyBuckets) {
  Case c{Opt::Adam, {}, 1, 4};
  c.ddp.gradient_as_bucket_view = true;
  c.ddp.bucket_cap_mb = 400.0 / (1 << 20);  // ~400 bytes: a bucket per parameter or two
  c.ddp.first_bucket_mb = 100.0 / (1 << 20);
  check_equivalence(c);
}

TEST(DDP, AccumulationThroughNoSync) { check_equivalence({Opt::SGD, {}, 3, 3}); }

TEST(DDP, AccumulationThroughNoSyncWithBucketViews) {
  Case c{Opt::Adam, {}, 2, 3};
  c.ddp.gradient_as_bucket_view = true;
  c.ddp.bucket_cap_mb = 1000.0 / (1 << 20);
  check_equivalence(c);
}

TEST(DDP, GradientsAreViewsOfTheBuckets) {
  auto comm = world();
  DDPOptions o;
  o.gradient_as_bucket_view = true;
  auto model = small_mlp(3);
  DistributedDataParallel ddp(model, comm, o);
  Batch b = make_batch(5, {8, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].grad().data_ptr(), ddp.reducer().bucket_view(i).data_ptr()) << "parameter " << i;
}

TEST(DDP, BucketsFollowReverseParameterOrder) {
  auto comm = world();
  DDPOptions o;
  o.bucket_cap_mb = 1200.0 / (1 << 20);
  o.first_bucket_mb = 100.0 / (1 << 20);
  auto model = small_mlp(3);  // 12x16, 16, 16x16, 16, 16x5, 5 floats
  DistributedDataParallel ddp(model, comm, o);
  auto names = ddp.bucket_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front().front(), "4.bias");  // the last parameter comes first
  EXPECT_EQ(names.back().back(), "0.weight");
  // 4.bias (20 B) then 4.weight (320 B) pass the 100 B first limit: they are the first bucket.
  EXPECT_EQ(names.front(), (std::vector<std::string>{"4.bias", "4.weight"}));
  // Buckets launch during backward, as soon as their gradients are in: all but the last one
  // before the last gradient arrives.
  Batch b = make_batch(5, {8, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();
  EXPECT_TRUE(ddp.reducer().finalized());
  EXPECT_EQ(ddp.reducer().stats().launched_early, static_cast<int64_t>(names.size()) - 1);
}

// A TwoBranch from `seed` under DDP (find_unused_parameters) against one process, SGD, 3 steps:
// each rank cuts its shard into `micro_batches` (all but the last under no_sync), and uses_b(rank,
// step, micro-batch) says whether b takes part; the reference is the mean over every rank's
// micro-batches of their losses.
void check_two_branch(uint64_t seed, uint64_t batch_seed, DDPOptions o, int micro_batches,
                      const std::function<bool(int, int, int)>& uses_b, const std::string& what) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  o.find_unused_parameters = true;
  auto model = std::make_shared<TwoBranch>(seed);
  auto ref = std::make_shared<TwoBranch>(seed);
  DistributedDataParallel ddp(model, comm, o);
  auto opt = make_optimizer(Opt::SGD, ddp.parameters());
  auto opt_ref = make_optimizer(Opt::SGD, ref->parameters());
  const double w = 1.0 / micro_batches;
  for (int step = 0; step < 3; ++step) {
    Batch b = make_batch(batch_seed + static_cast<uint64_t>(step), {kBatch, 12}, 5);
    opt_ref->zero_grad();
    Tensor total;
    for (int r = 0; r < n; ++r) {
      Batch s = shard(b, r, n);
      const int64_t m = s.x.size(0) / micro_batches;
      for (int a = 0; a < micro_batches; ++a) {
        ref->use_b = uses_b(r, step, a);
        Tensor l = ops::cross_entropy(ref->forward(s.x.narrow0(a * m, m)), s.y.narrow0(a * m, m)) * (w / n);
        total = total.defined() ? total + l : l;
      }
    }
    total.backward();
    opt_ref->step();

    opt->zero_grad();
    Batch s = shard(b, rank, n);
    const int64_t m = s.x.size(0) / micro_batches;
    for (int a = 0; a < micro_batches; ++a) {
      model->use_b = uses_b(rank, step, a);
      auto micro_step = [&] {
        (ops::cross_entropy(ddp.forward(s.x.narrow0(a * m, m)), s.y.narrow0(a * m, m)) * w).backward();
      };
      if (a + 1 < micro_batches) {
        auto no_sync = ddp.no_sync();
        micro_step();
      } else {
        micro_step();
      }
    }
    ddp.finalize();
    opt->step();
  }
  expect_same_parameters(*model, *ref, kRtol, what);
  expect_replicas_identical(*model, *comm);
}

TEST(DDP, FindUnusedParametersWithRankDependentUse) {
  // b on step-dependent ranks only.
  check_two_branch(11, 77, {}, 1, [](int r, int step, int) { return (r + step) % 2 == 0; }, "find_unused_parameters");
}

// A parameter every rank uses in a no_sync() micro-batch but none in the synchronised one gets the
// ranks' average all the same: its use is remembered across the step's micro-batches (as PyTorch's
// local_used_map), not read from the last graph alone, which would leave each rank its own gradient.
TEST(DDP, FindUnusedParametersUsedOnlyUnderNoSync) {
  for (bool views : {false, true}) {
    DDPOptions o;
    o.gradient_as_bucket_view = views;
    check_two_branch(14, 55, o, 2, [](int, int, int micro) { return micro == 0; },
                     views ? "no_sync use, bucket views" : "no_sync use");
  }
}

TEST(DDP, GloballyUnusedParameterKeepsNoGradient) {
  auto comm = world();
  DDPOptions o;
  o.find_unused_parameters = true;
  auto model = std::make_shared<TwoBranch>(12);
  model->use_b = false;
  DistributedDataParallel ddp(model, comm, o);
  Batch b = make_batch(3, {8, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();
  auto p = model->named_parameters();
  EXPECT_TRUE(p[0].second.grad().defined());
  EXPECT_FALSE(p[2].second.grad().defined()) << "b.weight was used by no rank: its .grad stays undefined";
  EXPECT_FALSE(p[3].second.grad().defined());
}

TEST(DDP, StaticGraphWithUnusedParameter) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  DDPOptions o;
  o.static_graph = true;
  auto model = std::make_shared<TwoBranch>(13);
  auto ref = std::make_shared<TwoBranch>(13);
  model->use_b = ref->use_b = false;
  DistributedDataParallel ddp(model, comm, o);
  auto opt = make_optimizer(Opt::Adam, ddp.parameters());
  auto opt_ref = make_optimizer(Opt::Adam, ref->parameters());
  for (int step = 0; step < 3; ++step) {
    Batch b = make_batch(99 + static_cast<uint64_t>(step), {kBatch, 12}, 5);
    opt_ref->zero_grad();
    ops::cross_entropy(ref->forward(b.x), b.y).backward();
    opt_ref->step();
    opt->zero_grad();
    Batch s = shard(b, rank, n);
    ops::cross_entropy(ddp.forward(s.x), s.y).backward();
    opt->step();
  }
  expect_same_parameters(*model, *ref, kRtol, "static_graph");
}

TEST(DDP, SyncBatchNormCnnMatchesSingleProcess) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  const int64_t batch = 24;
  auto ref = small_cnn(21);
  auto model = nn::parallel::convert_sync_batchnorm(small_cnn(21), comm);
  DistributedDataParallel ddp(model, comm);
  auto opt = make_optimizer(Opt::SGD, ddp.parameters());
  auto opt_ref = make_optimizer(Opt::SGD, ref->parameters());
  for (int step = 0; step < 3; ++step) {
    Batch b = make_batch(500 + static_cast<uint64_t>(step), {batch, 1, 8, 8}, 3);
    opt_ref->zero_grad();
    ops::cross_entropy(ref->forward(b.x), b.y).backward();
    opt_ref->step();
    opt->zero_grad();
    Batch s = shard(b, rank, n);
    ops::cross_entropy(ddp.forward(s.x), s.y).backward();
    opt->step();
  }
  expect_same_parameters(*model, *ref, 2e-5, "DDP + SyncBatchNorm");
  auto bufs = model->named_buffers(), ref_bufs = ref->named_buffers();
  ASSERT_EQ(bufs.size(), ref_bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) expect_close(bufs[i].second, ref_bufs[i].second, kRtol, bufs[i].first);
}

TEST(DDP, BroadcastBuffersEachForward) {
  auto comm = world();
  auto model = small_cnn(4);
  DistributedDataParallel ddp(model, comm);
  // Ranks see different data, so their BN running statistics drift apart ...
  Batch b = make_batch(40 + static_cast<uint64_t>(comm->rank()), {6, 1, 8, 8}, 3);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();
  std::vector<float> rank0_stats;
  {
    Tensor rm = model->named_buffers()[0].second.detach().clone();
    comm->broadcast(rm.data_ptr(), rm.numel(), rm.dtype(), 0)->wait();
    rank0_stats = rm.to_vector<float>();
  }
  // ... and the next synchronised forward starts from rank 0's (eval mode: BN leaves them alone).
  ddp.eval();
  ddp.forward(b.x);
  EXPECT_EQ(model->named_buffers()[0].second.to_vector<float>(), rank0_stats);
  // A forward under NoGradGuard is local: nothing is broadcast.
  Tensor rm = model->named_buffers()[0].second;
  rm.fill_(comm->rank());
  NoGradGuard no_grad;
  ddp.forward(b.x);
  EXPECT_EQ(rm.to_vector<float>(), std::vector<float>(4, static_cast<float>(comm->rank())));
}

TEST(ParallelSetup, DdpModeWithAccumulationMatchesSingleProcess) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  train::ParallelConfig pc;
  pc.mode = train::ParallelMode::DDP;
  pc.accumulation_steps = 2;
  pc.sync_bn = true;
  auto ps = train::setup_parallel(pc, small_cnn(8), comm);
  ASSERT_NE(ps.ddp, nullptr);
  EXPECT_EQ(ps.world_size(), n);
  auto ref = small_cnn(8);
  auto opt = make_optimizer(Opt::SGD, ps.model->parameters());
  auto opt_ref = make_optimizer(Opt::SGD, ref->parameters());
  for (int step = 0; step < 2; ++step) {
    // Reference: the average over the two micro-batches, each spread over all ranks.
    opt_ref->zero_grad();
    std::vector<Batch> micro;
    for (int a = 0; a < 2; ++a) {
      micro.push_back(make_batch(60 + static_cast<uint64_t>(2 * step + a), {8 * static_cast<int64_t>(n), 1, 8, 8}, 3));
      (ops::cross_entropy(ref->forward(micro[static_cast<size_t>(a)].x), micro[static_cast<size_t>(a)].y) * 0.5)
          .backward();
    }
    opt_ref->step();
    opt->zero_grad();
    for (int a = 0; a < 2; ++a) {
      auto scope = ps.accumulation_scope(a);
      EXPECT_EQ(scope.has_value(), a == 0);
      Batch s = shard(micro[static_cast<size_t>(a)], rank, n);
      (ops::cross_entropy(ps.model->forward(s.x), s.y) * 0.5).backward();
    }
    ps.before_optimizer_step();
    opt->step();
  }
  expect_same_parameters(*ps.inner, *ref, 2e-5, "setup_parallel(ddp, accumulation 2, sync_bn)");
  ps.before_evaluation();
}

TEST(Metrics, EvalShardsCountEverySampleOnce) {
  auto comm = world();
  const int64_t n = 1001;
  auto r = nn::parallel::eval_shard(n, comm->size(), comm->rank());
  nn::parallel::MetricSums local;
  for (int64_t i = r.begin; i < r.end; ++i) {
    local.count += 1;
    local.correct += i % 3 == 0;
    local.loss_sum += 0.5 * static_cast<double>(i);
  }
  auto total = nn::parallel::allreduce_metrics(*comm, local);
  EXPECT_EQ(total.count, n);
  EXPECT_EQ(total.correct, 334);
  EXPECT_DOUBLE_EQ(total.loss_sum, 0.5 * 1000.0 * 1001.0 / 2.0);
  EXPECT_DOUBLE_EQ(nn::parallel::allreduce_mean(*comm, comm->rank()), (comm->size() - 1) / 2.0);
}

TEST(Sampler, ShardsAgreeAcrossRanks) {
  auto comm = world();
  nn::parallel::DistributedSampler s(103, comm->size(), comm->rank());
  s.set_epoch(2);
  auto mine = s.indices();
  // Gather every rank's shard: together they cover the dataset (with padding) once.
  Tensor t = Tensor::from_vector(mine, {static_cast<int64_t>(mine.size())});
  Tensor all = Tensor::empty({comm->size() * t.numel()}, DType::i64);
  comm->allgather(t.data_ptr(), all.data_ptr(), t.numel(), DType::i64)->wait();
  std::vector<int> seen(103, 0);
  for (int64_t v : all.to_vector<int64_t>()) seen[static_cast<size_t>(v)] += 1;
  int pad = static_cast<int>(s.total_size() - 103);
  int twice = 0;
  for (int c : seen) {
    EXPECT_GE(c, 1);
    twice += c - 1;
  }
  EXPECT_EQ(twice, pad);
}

}  // namespace
}  // namespace tandem::testing
