// DistributedDataParallel on GPUs: each rank on cuda:<local rank>, gradients reduced by the NCCL
// communicator (our ring over ncclSend/ncclRecv, and ncclAllReduce), against one CPU process
// training on the whole batch. Skips, saying why, without a GPU or with fewer GPUs than ranks on a
// node; CI has none, a GPU machine runs it.
#include <cstring>

#include "comm/communicator.h"
#include "comm/mpi/mpi_comm.h"
#include "nn/optim.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/zero_optimizer.h"
#include "runtime/device_query.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;

// cnn: conv (cuDNN) + BatchNorm, compared with the reference on one rank only (BatchNorm normalises
// each rank's shard); mlp: N ranks against the one CPU process.
void train_and_compare(comm::Options::Algo algo, bool bucket_view, bool cnn) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda::describe();
  if (comm::local_size() > cuda::device_count())
    GTEST_SKIP() << comm::local_size() << " ranks on this node share " << cuda::device_count() << " GPU(s)";
  const Device dev = comm::node_device();
  ASSERT_EQ(dev.kind, DeviceKind::CUDA);
  comm::Options co;
  co.algo = algo;
  co.timeout_s = 120;
  auto comm = comm::make_world_communicator(dev, co);
  const int rank = comm->rank(), n = comm->size();
  constexpr int64_t kBatch = 48;

  auto make = [cnn](uint64_t seed) -> std::shared_ptr<nn::Module> { return cnn ? std::shared_ptr<nn::Module>(small_cnn(seed)) : small_mlp(seed); };
  auto ref = make(11);  // on the CPU, the whole batch
  auto model = make(11 + static_cast<uint64_t>(rank));
  model->to(dev);
  DDPOptions o;
  o.gradient_as_bucket_view = bucket_view;
  o.broadcast_buffers = false;  // BN statistics stay per rank, as the reference has its own
  DistributedDataParallel ddp(model, comm, o);
  nn::SGDOptions so;
  so.lr = 0.1;
  so.momentum = 0.9;
  nn::SGD opt_ref(ref->parameters(), so), opt(ddp.parameters(), so);
  for (int step = 0; step < 4; ++step) {
    Batch b = cnn ? make_batch(500 + static_cast<uint64_t>(step), {kBatch, 1, 8, 8}, 3)
                  : make_batch(500 + static_cast<uint64_t>(step), {kBatch, 12}, 5);
    opt_ref.zero_grad();
    ops::cross_entropy(ref->forward(b.x), b.y).backward();
    opt_ref.step();

    Batch mine = shard(b, rank, n);
    opt.zero_grad();
    ops::cross_entropy(ddp.forward(mine.x.to(dev)), mine.y.to(dev)).backward();
    ddp.finalize();
    opt.step();
  }
  if (n == 1 || !cnn) expect_same_parameters(*model, *ref, 1e-4, "DDP on cuda vs one CPU process");
  // Every rank holds the same weights: gather them on rank 0's device and compare.
  for (auto& [name, p] : model->named_parameters()) {
    Tensor all = Tensor::empty({n * p.numel()}, p.dtype(), dev);
    Tensor mine = p.detach().clone();
    comm->allgather(mine.data_ptr(), all.data_ptr(), p.numel(), p.dtype())->wait();
    auto v = all.to_vector<float>();
    for (int r = 1; r < n; ++r)
      for (int64_t i = 0; i < p.numel(); ++i)
        ASSERT_EQ(v[static_cast<size_t>(r * p.numel() + i)], v[static_cast<size_t>(i)]) << name << " rank " << r;
  }
}

// ZeRO over NCCL (docs/zero.md): stages 1 and 2 on the GPUs give stage 0's parameters bit for bit,
// with the ring's phases (reduce_scatter_chunks, allgather_chunks) on the NCCL transport or, with
// Algo::Native, ncclAllReduce reducing each bucket whole. Not yet run on a GPU when written.
void zero_matches_stage0(comm::Options::Algo algo, int stage) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda::describe();
  if (comm::local_size() > cuda::device_count())
    GTEST_SKIP() << comm::local_size() << " ranks on this node share " << cuda::device_count() << " GPU(s)";
  const Device dev = comm::node_device();
  comm::Options co;
  co.algo = algo;
  co.timeout_s = 120;
  auto comm = comm::make_world_communicator(dev, co);
  const int rank = comm->rank(), n = comm->size();
  auto base_model = small_mlp(11), zero_model = small_mlp(11);
  base_model->to(dev);
  zero_model->to(dev);
  DDPOptions o0;
  o0.first_bucket_mb = 0.0004;
  o0.bucket_cap_mb = 0.0008;
  DDPOptions oz = o0;
  oz.zero_stage = stage;
  DistributedDataParallel base(base_model, comm, o0), zero(zero_model, comm, oz);
  nn::AdamOptions ao;
  ao.lr = 1e-2;
  ao.weight_decay = 1e-2;
  nn::AdamW opt_base(base.parameters(), ao);
  nn::parallel::ZeroOptimizer opt_zero(zero, std::make_unique<nn::AdamW>(zero.parameters(), ao));
  for (int step = 0; step < 4; ++step) {
    Batch mine = shard(make_batch(600 + static_cast<uint64_t>(step), {48, 12}, 5), rank, n);
    for (auto [ddp, opt] : {std::pair<DistributedDataParallel*, nn::Optimizer*>{&base, &opt_base}, {&zero, &opt_zero}}) {
      opt->zero_grad();
      ops::cross_entropy(ddp->forward(mine.x.to(dev)), mine.y.to(dev)).backward();
      ddp->finalize();
      opt->step();
    }
  }
  zero.sync_params();  // the last step's all-gather, in flight until the next forward
  auto a = zero_model->named_parameters(), b = base_model->named_parameters();
  for (size_t k = 0; k < a.size(); ++k) {
    auto va = a[k].second.to_vector<float>(), vb = b[k].second.to_vector<float>();
    for (size_t i = 0; i < va.size(); ++i)
      ASSERT_EQ(std::memcmp(&va[i], &vb[i], 4), 0) << a[k].first << "[" << i << "] at zero_stage " << stage;
  }
}

TEST(DDPNccl, ZeroStage1RingBitwiseStage0) { zero_matches_stage0(comm::Options::Algo::Ring, 1); }
TEST(DDPNccl, ZeroStage2NativeBitwiseStage0) { zero_matches_stage0(comm::Options::Algo::Native, 2); }

TEST(DDPNccl, RingMlpMatchesOneCpuProcess) { train_and_compare(comm::Options::Algo::Ring, false, false); }
TEST(DDPNccl, NativeBucketViewsMlpMatchesOneCpuProcess) { train_and_compare(comm::Options::Algo::Native, true, false); }
TEST(DDPNccl, RingCnnMatchesOneCpuProcess) { train_and_compare(comm::Options::Algo::Ring, true, true); }

}  // namespace
}  // namespace tandem::testing
