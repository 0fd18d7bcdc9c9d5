// ZeRO stages 1 and 2 under mpirun: the same parameter bits as DDP (zero_stage 0) on the same ranks
// for SGD, Adam and AdamW (plain and fused), with accumulation through no_sync and with many small
// buckets whose shards cut parameters anywhere; the same weights as one process on the global
// batch to 1e-5; the optimizer state of a rank is its shard's; the two collective halves give the
// all-reduce's bits. Each rank runs DDP stage 0 and the ZeRO model side by side.
#include <cstring>
#include <functional>

#include "nn/optim.h"
#include "nn/optim/fused_adam.h"
#include "nn/optim/fused_sgd.h"
#include "nn/amp/grad_scaler.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/rank_memory.h"
#include "nn/parallel/ranked_norm.h"
#include "nn/parallel/reducer.h"
#include "nn/parallel/zero_optimizer.h"
#include "runtime/autocast.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;
using nn::parallel::ZeroOptimizer;

constexpr int64_t kBatch = 72;  // divisible by 1..4 ranks times 1..3 micro-batches
constexpr double kRtol = 1e-5;

enum class Opt { SGD, Adam, AdamW, FusedSGD, FusedAdamW };

// master_weights: the fused optimizers keep f32 copies of 16-bit parameters (and step those).
std::unique_ptr<nn::Optimizer> make_optimizer(Opt kind, const std::vector<Tensor>& params, bool master_weights = false) {
  nn::FusedOptions fo;
  fo.master_weights = master_weights;
  if (kind == Opt::SGD || kind == Opt::FusedSGD) {
    nn::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.weight_decay = 1e-3;
    if (kind == Opt::FusedSGD) return std::make_unique<nn::FusedSGD>(params, o, fo);
    return std::make_unique<nn::SGD>(params, o);
  }
  nn::AdamOptions o;
  o.lr = 1e-2;
  o.weight_decay = kind == Opt::Adam ? 1e-3 : 1e-2;
  if (kind == Opt::Adam) return std::make_unique<nn::Adam>(params, o);
  if (kind == Opt::FusedAdamW) return std::make_unique<nn::FusedAdamW>(params, o, fo);
  return std::make_unique<nn::AdamW>(params, o);
}

// Bit for bit, parameter by parameter.
void expect_bitwise(const nn::Module& actual, const nn::Module& expected, const std::string& what) {
  auto a = actual.named_parameters(), e = expected.named_parameters();
  ASSERT_EQ(a.size(), e.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const Tensor& x = a[k].second;
    const Tensor& y = e[k].second;
    ASSERT_EQ(x.nbytes(), y.nbytes());
    auto vx = x.to_vector<float>(), vy = y.to_vector<float>();
    for (size_t i = 0; i < vx.size(); ++i) {
      uint32_t bx, by;
      std::memcpy(&bx, &vx[i], 4);
      std::memcpy(&by, &vy[i], 4);
      ASSERT_EQ(bx, by) << what << ": " << a[k].first << "[" << i << "] " << vx[i] << " vs " << vy[i];
    }
  }
}

struct Case {
  Opt opt = Opt::SGD;
  int stage = 1;
  int accumulation = 1;
  int steps = 4;
  double bucket_cap_mb = 25.0, first_bucket_mb = 1.0;
  double clip = 0;   // > 0: clip the global norm (DDP's rank order; one process: clip_grad_norm)
  bool amp = false;  // f16 autocast and a GradScaler whose first step overflows (skipped, then backoff)
  DType amp_dtype = DType::f16;  // bf16: autocast to bf16, no GradScaler (bf16 has f32's range)
  bool bf16_params = false;      // the model in bf16, the fused optimizers with f32 master weights
};

nn::GradScalerOptions scaler_options(const Case& c) {
  nn::GradScalerOptions o;
  o.enabled = c.amp && c.amp_dtype == DType::f16;
  o.init_scale = 3e38;       // the first step's scaled loss is inf in f32: skipped on every rank
  o.backoff_factor = 1e-34;  // then 3e4
  return o;
}

// One micro-batch loop through `ddp`: accumulation with no_sync, the last micro-batch reduced.
void train_step(DistributedDataParallel& ddp, nn::Optimizer& opt, nn::GradScaler& scaler, const Batch& mine,
                const Case& c) {
  const int accumulation = c.accumulation;
  opt.zero_grad();
  const int64_t micro = mine.x.size(0) / accumulation;
  for (int a = 0; a < accumulation; ++a) {
    Tensor x = mine.x.narrow0(a * micro, micro), y = mine.y.narrow0(a * micro, micro);
    if (c.bf16_params) x = ops::cast(x, DType::bf16);
    auto micro_step = [&] {
      Tensor loss;
      {
        AutocastGuard autocast(c.amp_dtype, c.amp);
        loss = ops::cross_entropy(ddp.forward(x), y) * (1.0 / accumulation);
      }
      scaler.scale(loss).backward();
    };
    if (a + 1 < accumulation) {
      auto no_sync = ddp.no_sync();
      micro_step();
    } else {
      micro_step();
    }
  }
  ddp.finalize();
  nn::clipped_scaler_step(
      scaler, opt, [&](double max_norm) { nn::parallel::clip_grad_norm_ranked(ddp, max_norm); }, c.clip);
}

// The mpi communicator without shared-memory buckets: every bucket then takes the ring's phases
// (make_buffer memory in a shared window is summed directly instead, and reduce_scatter_chunks then
// reduces it whole). Made per test, gone before MPI_Finalize.
std::shared_ptr<comm::Communicator> ring_only_world() {
  comm::Options o;
  o.timeout_s = 120;
  o.shared_memory = false;
  return comm::make_mpi_communicator(o);
}

void check_zero_on(const Case& c, const std::shared_ptr<comm::Communicator>& comm) {
  const int rank = comm->rank(), n = comm->size();
  auto ref = small_mlp(7);
  auto base_model = small_mlp(7), zero_model = small_mlp(7);
  if (c.bf16_params) {
    base_model->to(DType::bf16);
    zero_model->to(DType::bf16);
  }
  DDPOptions o0;
  o0.bucket_cap_mb = c.bucket_cap_mb;
  o0.first_bucket_mb = c.first_bucket_mb;
  DDPOptions oz = o0;
  oz.zero_stage = c.stage;
  DistributedDataParallel base(base_model, comm, o0), zero(zero_model, comm, oz);
  auto opt_ref = make_optimizer(c.opt, ref->parameters());
  auto opt_base = make_optimizer(c.opt, base.parameters(), c.bf16_params);
  ZeroOptimizer opt_zero(zero, make_optimizer(c.opt, zero.parameters(), c.bf16_params));
  nn::GradScaler scaler_base(scaler_options(c), comm.get()), scaler_zero(scaler_options(c), comm.get());
  for (int step = 0; step < c.steps; ++step) {
    Batch b = make_batch(1000 + static_cast<uint64_t>(step), {kBatch, 12}, 5);
    opt_ref->zero_grad();
    ops::cross_entropy(ref->forward(b.x), b.y).backward();
    if (c.clip > 0) nn::clip_grad_norm(ref->parameters(), c.clip);
    opt_ref->step();
    Batch mine = shard(b, rank, n);
    train_step(base, *opt_base, scaler_base, mine, c);
    train_step(zero, opt_zero, scaler_zero, mine, c);
    if (c.stage == 2) {  // the model keeps no gradient: the shard's is all there is
      for (const Tensor& p : zero_model->parameters()) ASSERT_FALSE(p.grad().defined());
    }
  }
  // The last step's all-gather is in flight (the next forward would wait for it); a reader waits.
  if (n > 1) {
    EXPECT_TRUE(zero.reducer().params_pending());
  }
  zero.sync_params();
  EXPECT_FALSE(zero.reducer().params_pending());
  expect_bitwise(*zero_model, *base_model, fmt::format("zero_stage {} vs 0 on {} ranks ({})", c.stage, n, comm.get() == world().get() ? "shared memory" : "ring"));
  if (c.amp && c.amp_dtype == DType::f16) {  // the skipped step happened, alike
    EXPECT_EQ(scaler_zero.get_scale(), scaler_base.get_scale());
    EXPECT_LT(scaler_zero.get_scale(), 1e5);
  } else if (!c.amp && !c.bf16_params) {  // 16 bits round differently on other batch sizes: no one-process reference
    expect_same_parameters(*zero_model, *ref, kRtol, "zero vs one process on the global batch");
  }

  // What a rank holds (the done record's fields): the state 1/N of stage 0's, but for the chunks'
  // rounding and the step counts of the pieces (Adam: 8 bytes each); at stage 2 the gradients too.
  const auto mem0 = nn::parallel::rank_memory(*base_model, *opt_base, &base.reducer());
  const auto memz = nn::parallel::rank_memory(*zero_model, opt_zero, &zero.reducer());
  const int64_t buckets = static_cast<int64_t>(zero.reducer().bucket_indices().size());
  const int64_t params = static_cast<int64_t>(zero_model->parameters().size());
  EXPECT_EQ(memz.param_bytes, mem0.param_bytes);
  EXPECT_LE(memz.optimizer_state_bytes, mem0.optimizer_state_bytes / n + 16 * (buckets + params + 1));
  if (c.stage == 2) {  // the shards, and the pool of buckets in flight (kPool per dtype, at most every bucket)
    const int64_t pool = zero.reducer().pool_bytes();
    int64_t all_buckets = 0;
    for (int64_t bytes : zero.reducer().bucket_bytes()) all_buckets += bytes;
    EXPECT_LE(pool, all_buckets);
    EXPECT_EQ(pool > 0, true);
    EXPECT_LE(memz.grad_bytes, mem0.param_bytes / n + 4 * buckets + pool);
  } else {
    EXPECT_EQ(memz.grad_bytes, mem0.grad_bytes);
  }

  // The state of a rank is its shard's: each rank's elements add up to the model's.
  int64_t total = 0;
  for (const Tensor& p : zero_model->parameters()) total += p.numel();
  Tensor mine = Tensor::from_vector(std::vector<int64_t>{opt_zero.shard_numel()}, {1}, DType::i64);
  comm->allreduce(mine, comm::ReduceOp::Sum)->wait();
  EXPECT_EQ(mine.to_vector<int64_t>()[0], total);
  EXPECT_LE(opt_zero.shard_numel(), total / n + static_cast<int64_t>(zero.reducer().bucket_indices().size()));
}

void check_zero(const Case& c) {
  check_zero_on(c, world());
  check_zero_on(c, ring_only_world());
}

// Tiny buckets: several per parameter list, shards that start and end inside parameters.
constexpr double kTinyFirst = 0.0004, kTinyCap = 0.0008;

TEST(Zero, Stage1SgdBitwiseDDP) { check_zero({Opt::SGD, 1}); }
TEST(Zero, Stage1AdamBitwiseDDP) { check_zero({Opt::Adam, 1}); }
TEST(Zero, Stage1AdamWBitwiseDDP) { check_zero({Opt::AdamW, 1}); }
TEST(Zero, Stage1FusedSgdBitwiseDDP) { check_zero({Opt::FusedSGD, 1}); }
TEST(Zero, Stage1FusedAdamWBitwiseDDP) { check_zero({Opt::FusedAdamW, 1}); }
TEST(Zero, Stage1AdamWManyBucketsBitwiseDDP) { check_zero({Opt::AdamW, 1, 1, 4, kTinyCap, kTinyFirst}); }
TEST(Zero, Stage1SgdAccumulationBitwiseDDP) { check_zero({Opt::SGD, 1, 3, 3}); }
TEST(Zero, Stage2SgdBitwiseDDP) { check_zero({Opt::SGD, 2}); }
TEST(Zero, Stage2AdamBitwiseDDP) { check_zero({Opt::Adam, 2}); }
TEST(Zero, Stage2AdamWBitwiseDDP) { check_zero({Opt::AdamW, 2}); }
TEST(Zero, Stage2AdamWManyBucketsBitwiseDDP) { check_zero({Opt::AdamW, 2, 1, 4, kTinyCap, kTinyFirst}); }
TEST(Zero, Stage2AdamAccumulationBitwiseDDP) { check_zero({Opt::Adam, 2, 3, 3, kTinyCap, kTinyFirst}); }

// Clipping at 0.05 (it clips every step here), in DDP's rank order for both.
TEST(Zero, Stage1AdamWClippedBitwiseDDP) { check_zero({Opt::AdamW, 1, 1, 4, kTinyCap, kTinyFirst, 0.05}); }
TEST(Zero, Stage2SgdClippedAccumulationBitwiseDDP) { check_zero({Opt::SGD, 2, 3, 3, kTinyCap, kTinyFirst, 0.05}); }
TEST(Zero, Stage2FusedAdamWClippedBitwiseDDP) { check_zero({Opt::FusedAdamW, 2, 1, 4, 25.0, 1.0, 0.05}); }
// f16 autocast with a GradScaler: the first step overflows and is skipped on every rank (one flag).
TEST(Zero, Stage1AdamF16ScalerSkipBitwiseDDP) { check_zero({Opt::Adam, 1, 1, 4, kTinyCap, kTinyFirst, 0, true}); }
TEST(Zero, Stage2AdamWF16ScalerClippedBitwiseDDP) { check_zero({Opt::AdamW, 2, 2, 4, kTinyCap, kTinyFirst, 0.05, true}); }
TEST(Zero, Stage2FusedSgdF16ScalerBitwiseDDP) { check_zero({Opt::FusedSGD, 2, 1, 4, 25.0, 1.0, 0, true}); }
// bf16: autocast (no GradScaler), and bf16 parameters under the fused AdamW's f32 master weights.
TEST(Zero, Stage1AdamWBf16AutocastClippedBitwiseDDP) {
  check_zero({Opt::AdamW, 1, 1, 3, kTinyCap, kTinyFirst, 0.05, true, DType::bf16});
}
TEST(Zero, Stage2AdamBf16AutocastAccumulationBitwiseDDP) {
  check_zero({Opt::Adam, 2, 2, 3, kTinyCap, kTinyFirst, 0, true, DType::bf16});
}
TEST(Zero, Stage1FusedAdamWBf16ParamsBitwiseDDP) {
  check_zero({Opt::FusedAdamW, 1, 1, 3, kTinyCap, kTinyFirst, 0, false, DType::f16, true});
}
TEST(Zero, Stage2FusedAdamWBf16ParamsClippedBitwiseDDP) {
  check_zero({Opt::FusedAdamW, 2, 1, 3, kTinyCap, kTinyFirst, 0.05, false, DType::f16, true});
}

// zero_grad() right after step(), while the parameters' all-gather is in flight (stage 1 gathers in
// the buckets that hold the shards' gradients: they are zeroed as each arrives), then a step without
// a backward: stage 0 steps on zero gradients (momentum and weight decay still move the weights).
void check_zero_grad_during_gather(int stage) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  Case c{Opt::SGD, stage, 1, 2, kTinyCap, kTinyFirst};
  DDPOptions o0;
  o0.bucket_cap_mb = c.bucket_cap_mb;
  o0.first_bucket_mb = c.first_bucket_mb;
  DDPOptions oz = o0;
  oz.zero_stage = stage;
  auto base_model = small_mlp(5), zero_model = small_mlp(5);
  DistributedDataParallel base(base_model, comm, o0), zero(zero_model, comm, oz);
  auto opt_base = make_optimizer(c.opt, base.parameters());
  ZeroOptimizer opt_zero(zero, make_optimizer(c.opt, zero.parameters()));
  nn::GradScaler scaler(scaler_options(c), comm.get());
  Batch mine = shard(make_batch(4000, {kBatch, 12}, 5), rank, n);
  train_step(base, *opt_base, scaler, mine, c);
  train_step(zero, opt_zero, scaler, mine, c);
  opt_base->zero_grad();
  opt_zero.zero_grad();
  opt_base->step();
  opt_zero.step();
  zero.sync_params();
  expect_bitwise(*zero_model, *base_model, fmt::format("a step on zeroed gradients at zero_stage {} on {} ranks", stage, n));
}

TEST(Zero, ZeroGradWhileGatheringStage1) { check_zero_grad_during_gather(1); }
TEST(Zero, ZeroGradWhileGatheringStage2) { check_zero_grad_during_gather(2); }

// Checkpoints: the shards' state consolidated on rank 0 is stage 0's state_tensors() bit for bit;
// loaded (stage 0's layout) into the other stage, training goes on bitwise as stage 0's does.
void check_state_round_trip(Opt kind, int stage) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  Case c{kind, stage, 1, 2, kTinyCap, kTinyFirst};
  DDPOptions o0;
  o0.bucket_cap_mb = c.bucket_cap_mb;
  o0.first_bucket_mb = c.first_bucket_mb;
  DDPOptions oz = o0, oz2 = o0;
  oz.zero_stage = stage;
  oz2.zero_stage = 3 - stage;
  auto base_model = small_mlp(7), zero_model = small_mlp(7), resumed_model = small_mlp(99);
  DistributedDataParallel base(base_model, comm, o0), zero(zero_model, comm, oz);
  auto opt_base = make_optimizer(kind, base.parameters());
  ZeroOptimizer opt_zero(zero, make_optimizer(kind, zero.parameters()));
  nn::GradScaler scaler(scaler_options(c), comm.get());
  for (int step = 0; step < 2; ++step) {
    Batch mine = shard(make_batch(2000 + static_cast<uint64_t>(step), {kBatch, 12}, 5), rank, n);
    train_step(base, *opt_base, scaler, mine, c);
    train_step(zero, opt_zero, scaler, mine, c);
  }
  const nn::NamedTensors expected = opt_base->state_tensors();
  EXPECT_THROW(opt_zero.state_tensors(), Error);  // not consolidated yet
  opt_zero.consolidate_state(0);
  if (rank == 0) {
    const nn::NamedTensors got = opt_zero.state_tensors();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].first, expected[k].first);
      ASSERT_EQ(got[k].second.nbytes(), expected[k].second.nbytes()) << got[k].first;
      EXPECT_EQ(std::memcmp(got[k].second.data_ptr(), expected[k].second.data_ptr(), got[k].second.nbytes()), 0)
          << got[k].first;
    }
  }
  // Resume at the other stage from stage 0's state and weights.
  {
    NoGradGuard no_grad;
    auto src = base_model->parameters(), dst = resumed_model->parameters();
    for (size_t k = 0; k < src.size(); ++k) dst[k].copy_(src[k]);
  }
  DistributedDataParallel resumed(resumed_model, comm, oz2);
  ZeroOptimizer opt_resumed(resumed, make_optimizer(kind, resumed.parameters()));
  opt_resumed.load_state_tensors(expected);
  EXPECT_EQ(opt_resumed.step_count(), 2);
  for (int step = 2; step < 4; ++step) {
    Batch mine = shard(make_batch(2000 + static_cast<uint64_t>(step), {kBatch, 12}, 5), rank, n);
    train_step(base, *opt_base, scaler, mine, c);
    train_step(resumed, opt_resumed, scaler, mine, c);
  }
  opt_resumed.wait_params();
  expect_bitwise(*resumed_model, *base_model, fmt::format("resumed at zero_stage {} on {} ranks", 3 - stage, n));
}

TEST(Zero, AdamWStateRoundTripStage1) { check_state_round_trip(Opt::AdamW, 1); }
TEST(Zero, FusedSgdStateRoundTripStage2) { check_state_round_trip(Opt::FusedSGD, 2); }
TEST(Zero, FusedAdamWStateRoundTripStage2) { check_state_round_trip(Opt::FusedAdamW, 2); }

// find_unused_parameters with a branch that some ranks use in some steps and no rank in others
// (stage 0 then leaves its gradient as it was and its optimizer skips or steps it; the shards alike),
// with accumulation and clipping: stages 1 and 2 == stage 0 bit for bit.
void check_unused(Opt kind, int stage, bool static_graph) {
  auto comm = world();
  const int rank = comm->rank(), n = comm->size();
  DDPOptions o0;
  o0.find_unused_parameters = !static_graph;
  o0.static_graph = static_graph;
  o0.first_bucket_mb = kTinyFirst;
  o0.bucket_cap_mb = kTinyCap;
  DDPOptions oz = o0;
  oz.zero_stage = stage;
  auto base_model = std::make_shared<TwoBranch>(21), zero_model = std::make_shared<TwoBranch>(21);
  DistributedDataParallel base(base_model, comm, o0), zero(zero_model, comm, oz);
  auto opt_base = make_optimizer(kind, base.parameters());
  ZeroOptimizer opt_zero(zero, make_optimizer(kind, zero.parameters()));
  Case c{kind, stage, 2, 5};
  c.clip = 0.05;
  nn::GradScaler scaler(scaler_options(c), comm.get());
  for (int step = 0; step < c.steps; ++step) {
    // b: by no rank in steps 0 and 1 (never a gradient yet), then on alternating ranks, then by none.
    const bool b = static_graph ? false : (step == 2 || step == 3) && (rank + step) % 2 == 0;
    base_model->use_b = zero_model->use_b = b;
    Batch mine = shard(make_batch(3000 + static_cast<uint64_t>(step), {kBatch, 12}, 5), rank, n);
    train_step(base, *opt_base, scaler, mine, c);
    train_step(zero, opt_zero, scaler, mine, c);
  }
  zero.sync_params();
  expect_bitwise(*zero_model, *base_model,
                 fmt::format("{} at zero_stage {} vs 0 on {} ranks", static_graph ? "static_graph" : "find_unused", stage, n));
}

TEST(Zero, FindUnusedAdamStage1BitwiseDDP) { check_unused(Opt::Adam, 1, false); }
TEST(Zero, FindUnusedAdamWStage2BitwiseDDP) { check_unused(Opt::AdamW, 2, false); }
TEST(Zero, FindUnusedFusedAdamWStage2BitwiseDDP) { check_unused(Opt::FusedAdamW, 2, false); }
TEST(Zero, StaticGraphSgdStage2BitwiseDDP) { check_unused(Opt::SGD, 2, true); }

// The two halves: the owned chunk after reduce_scatter_chunks is bitwise allreduce's, on plain and
// on make_buffer memory, for sizes around the ring's doubling threshold; allgather_chunks fills the rest.
void check_chunk_collectives(const std::shared_ptr<comm::Communicator>& comm) {
  const int n = comm->size(), rank = comm->rank();
  for (int64_t count : {1, 5, 97, 1000, 8192, 8193, 40000}) {
    for (bool shared : {false, true}) {
      Generator gen(static_cast<uint64_t>(count * 10 + rank));
      Tensor data = rand_normal({count}, 0.0, 1.0, gen);
      Tensor a = shared ? comm->make_buffer(count, DType::f32) : Tensor::zeros({count}, DType::f32);
      Tensor z = shared ? comm->make_buffer(count, DType::f32) : Tensor::zeros({count}, DType::f32);
      a.copy_(data);
      z.copy_(data);
      comm->allreduce(a.data_ptr(), count, DType::f32, comm::ReduceOp::Avg)->wait();
      comm->reduce_scatter_chunks(z.data_ptr(), count, DType::f32, comm::ReduceOp::Avg)->wait();
      const int c = comm::Communicator::owned_chunk(rank, n);
      const int64_t lo = comm::Communicator::chunk_begin(count, n, c), hi = comm::Communicator::chunk_begin(count, n, c + 1);
      auto va = a.to_vector<float>(), vz = z.to_vector<float>();
      for (int64_t i = lo; i < hi; ++i)
        ASSERT_EQ(std::memcmp(&va[size_t(i)], &vz[size_t(i)], 4), 0) << "count " << count << " element " << i;
      comm->allgather_chunks(z.data_ptr(), count, DType::f32)->wait();
      vz = z.to_vector<float>();
      ASSERT_EQ(std::memcmp(va.data(), vz.data(), va.size() * 4), 0) << "count " << count << " after allgather_chunks";
    }
  }
}

TEST(Zero, ChunkCollectivesAreTheAllreduceHalves) {
  check_chunk_collectives(world());
  check_chunk_collectives(ring_only_world());
}

TEST(Zero, RefusesWhatItCannotKeepEqual) {
  auto comm = world();
  DDPOptions o;
  o.zero_stage = 1;
  o.gradient_as_bucket_view = true;
  EXPECT_THROW(DistributedDataParallel(small_mlp(1), comm, o), Error);
  DDPOptions plain;
  DistributedDataParallel ddp(small_mlp(1), comm, plain);
  EXPECT_THROW(ZeroOptimizer(ddp, make_optimizer(Opt::SGD, ddp.parameters())), Error);
}

}  // namespace
}  // namespace tandem::testing
