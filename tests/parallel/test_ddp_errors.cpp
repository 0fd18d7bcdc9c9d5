// DistributedDataParallel misuse under mpirun: every error names what is wrong (parameter, rank)
// and what to change, and is raised on every rank alike, so no rank is left waiting.
#include "nn/parallel/ddp.h"
#include "tests/parallel/parallel_util.h"

namespace tandem::testing {
namespace {

using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;

// Runs fn, expecting a tandem::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "no error thrown";
}

TEST(DDPErrors, ParameterShapeDiffersBetweenRanks) {
  auto comm = world();
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  // The last rank builds a wider hidden layer: parameter 0 ("0.weight") differs first.
  const int odd = comm->size() - 1;
  auto model = small_mlp(1, 12, comm->rank() == odd ? 17 : 16);
  expect_error([&] { DistributedDataParallel ddp(model, comm); },
               {"parameter 0", "'0.weight'", "[16, 12] f32 on rank 0", "[17, 12] f32 on rank " + std::to_string(odd)});
}

TEST(DDPErrors, ParameterCountDiffersBetweenRanks) {
  auto comm = world();
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto model = small_mlp(1);
  if (comm->rank() == 1) model->push_back(std::make_shared<nn::Linear>(5, 5));
  expect_error([&] { DistributedDataParallel ddp(model, comm); },
               {"parameter 6", "no parameter", "rank 0 has 6 parameters, rank 1 has 8"});
}

TEST(DDPErrors, UnusedParameterWithoutFindUnused) {
  auto comm = world();
  auto model = std::make_shared<TwoBranch>(5);
  model->use_b = false;
  DistributedDataParallel ddp(model, comm);
  Batch b = make_batch(1, {4, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();
  const std::vector<std::string> parts = {"find_unused_parameters", "b.weight, b.bias",
                                          "rank " + std::to_string(comm->rank())};
  expect_error([&] { ddp.finalize(); }, parts);
  // The next forward reports it too (as PyTorch does), before running the module.
  expect_error([&] { ddp.forward(b.x); }, parts);
}

TEST(DDPErrors, GradientReadyTwiceFromTwoBackwards) {
  auto comm = world();
  auto model = small_mlp(6);
  DistributedDataParallel ddp(model, comm);
  Batch b = make_batch(2, {4, 12}, 5);
  Tensor loss = ops::cross_entropy(ddp.forward(b.x), b.y);
  loss.backward(Tensor(), /*retain_graph=*/true);
  expect_error([&] { loss.backward(); }, {"ready only once", "received its gradient twice", "no_sync"});
}

TEST(DDPErrors, ParameterUsedOutsideForwardWithFindUnused) {
  auto comm = world();
  DDPOptions o;
  o.find_unused_parameters = true;
  auto model = std::make_shared<TwoBranch>(8);
  model->use_b = false;
  DistributedDataParallel ddp(model, comm, o);
  Batch b = make_batch(3, {4, 12}, 5);
  Tensor bw = model->named_parameters()[2].second;  // b.weight: unused in forward, used in the loss
  Tensor loss = ops::cross_entropy(ddp.forward(b.x), b.y) + ops::sum(bw) * 0.01;
  expect_error([&] { loss.backward(); }, {"ready only once", "'b.weight'", "outside forward()"});
}

TEST(DDPErrors, StaticGraphThatLosesAParameter) {
  auto comm = world();
  DDPOptions o;
  o.static_graph = true;
  auto model = std::make_shared<TwoBranch>(9);
  DistributedDataParallel ddp(model, comm, o);
  Batch b = make_batch(4, {4, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();  // first iteration: a and b used
  model->use_b = false;
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();  // b gets no gradient now
  expect_error([&] { ddp.finalize(); }, {"graph has changed", "static_graph", "b.weight"});
}

TEST(DDPErrors, StaticGraphThatGainsAParameter) {
  auto comm = world();
  DDPOptions o;
  o.static_graph = true;
  auto model = std::make_shared<TwoBranch>(10);
  model->use_b = false;
  DistributedDataParallel ddp(model, comm, o);
  Batch b = make_batch(5, {4, 12}, 5);
  ops::cross_entropy(ddp.forward(b.x), b.y).backward();  // first iteration: only a
  model->use_b = true;
  Tensor loss = ops::cross_entropy(ddp.forward(b.x), b.y);
  expect_error([&] { loss.backward(); }, {"graph has changed", "'b.", "static_graph=false"});
}

TEST(DDPErrors, NoParameters) {
  auto comm = world();
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::ReLU>());
  expect_error([&] { DistributedDataParallel ddp(model, comm); }, {"no parameter that requires a gradient"});
}

// A communicator that says its buffers live on cuda:0 (as nccl's do), around the host one.
class ClaimsGpu final : public ForwardingComm {
 public:
  using ForwardingComm::ForwardingComm;
  Device device() const override { return Device(DeviceKind::CUDA, 0); }
  std::string backend_name() const override { return "nccl"; }
};

TEST(DDPErrors, ParametersTheCommunicatorCannotReach) {
  auto comm = std::make_shared<ClaimsGpu>(world());
  expect_error([&] { DistributedDataParallel ddp(small_mlp(1), comm); },
               {"parameter '0.weight' is on cpu", "nccl communicator (on cuda:0) cannot reach",
                "move the module to cuda:0"});
}

TEST(DDPErrors, CannotClone) {
  auto comm = world();
  DistributedDataParallel ddp(small_mlp(1), comm);
  expect_error([&] { ddp.clone(); }, {"cannot be cloned"});
}

}  // namespace
}  // namespace tandem::testing
