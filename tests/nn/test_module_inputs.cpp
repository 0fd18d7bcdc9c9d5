// Modules with several inputs and outputs (Module::forward_many): a two-input model directly,
// through DistributedDataParallel (one rank of a local group) and through DataParallel over cpu:0
// and cpu:1 equals the computation written out by hand; a packed input split with ops::slice equals
// the two inputs; and the errors of a module given the wrong number of inputs.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/ddp.h"
#include "runtime/ops.h"
#include "tests/support/error_of.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {

// (x [N, 3], z [N, 2]) -> (h = tanh(fa(x) + fb(z)) [N, 4], 2 * h[:, 1:3] [N, 2]).
class TwoInput : public nn::Cloneable<TwoInput> {
 public:
  explicit TwoInput(uint64_t seed) : seed_(seed) { reset(); }
  void reset() override {
    Generator gen(seed_);
    fa = register_module("fa", std::make_shared<nn::Linear>(3, 4, true, gen));
    fb = register_module("fb", std::make_shared<nn::Linear>(2, 4, true, gen));
  }
  std::vector<Tensor> forward_many(const std::vector<Tensor>& in) override {
    TANDEM_CHECK(in.size() == 2, "TwoInput takes (x, z), got {} inputs", in.size());
    Tensor h = ops::tanh(fa->forward(in[0]) + fb->forward(in[1]));
    return {h, ops::slice(h, 1, 1, 3) * 2.0};
  }
  std::string type_name() const override { return "TwoInput"; }
  std::shared_ptr<nn::Linear> fa, fb;

 private:
  uint64_t seed_;
};

// One packed input [N, 5]: its columns 0..2 are x, 3..4 are z.
class Packed : public nn::Cloneable<Packed> {
 public:
  explicit Packed(uint64_t seed) { register_module("net", std::make_shared<TwoInput>(seed)); }
  Tensor forward(const Tensor& xz) override {
    return children()[0].second->forward_many({ops::slice(xz, -1, 0, 3), ops::slice(xz, -1, 3, 5)})[0];
  }
  std::string type_name() const override { return "Packed"; }
};

class Neither : public nn::Cloneable<Neither> {
 public:
  std::string type_name() const override { return "Neither"; }
};

struct Data {
  Tensor x, z, r0, r1;  // inputs, and the weights of the loss sum(h * r0) + sum(o * r1)
};
Data data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  return {rand_normal({n, 3}, 0, 1, gen), rand_normal({n, 2}, 0, 1, gen), rand_normal({n, 4}, 0, 1, gen),
          rand_normal({n, 2}, 0, 1, gen)};
}
Tensor loss_of(const std::vector<Tensor>& outs, const Data& d) {
  return ops::sum(outs.at(0) * d.r0.to(outs[0].device())) + ops::sum(outs.at(1) * d.r1.to(outs[1].device()));
}

// The model written out: its outputs, and the gradients of loss_of for its parameters.
struct Direct {
  std::vector<Tensor> outs;
  std::vector<Tensor> grads;
};
Direct direct(const TwoInput& m, const Data& d) {
  std::vector<Tensor> params;
  for (const Tensor& p : m.parameters()) params.push_back(p.detach().clone().set_requires_grad(true));
  // fa.weight, fa.bias, fb.weight, fb.bias
  Tensor h = ops::tanh(ops::linear(d.x, params[0], params[1]) + ops::linear(d.z, params[2], params[3]));
  Tensor o = ops::transpose(ops::slice0(ops::transpose(h, 0, 1), 1, 3), 0, 1) * 2.0;
  Tensor loss = loss_of({h, o}, d);
  return {{h.detach(), o.detach()}, grad({loss}, params)};
}

void expect_matches(const std::vector<Tensor>& outs, const nn::Module& m, const Direct& want, const std::string& what) {
  ASSERT_EQ(outs.size(), 2u) << what;
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(what + " output " + std::to_string(i));
    expect_close(outs[i], want.outs[i], 1e-6, 1e-5);
  }
  auto params = m.parameters();
  ASSERT_EQ(params.size(), want.grads.size()) << what;
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(what + " gradient " + std::to_string(i));
    ASSERT_TRUE(params[i].grad().defined());
    expect_close(params[i].grad(), want.grads[i], 1e-6, 1e-5);
  }
}

TEST(ModuleInputs, TwoInputsDirectly) {
  TwoInput m(1);
  Data d = data(5, 2);
  Direct want = direct(m, d);
  std::vector<Tensor> outs = m.forward_many({d.x, d.z});
  loss_of(outs, d).backward();
  expect_matches(outs, m, want, "Module");
}

TEST(ModuleInputs, PackedInputSplitWithSliceEqualsTwoInputs) {
  Packed p(3);
  const auto& net = static_cast<const TwoInput&>(*p.children()[0].second);
  Data d = data(4, 4);
  Tensor h = p.forward(ops::concat({d.x, d.z}, 1));
  expect_close(h, direct(net, d).outs[0], 1e-6, 1e-5);
  ops::sum(h).backward();
  for (auto& [name, t] : p.named_parameters()) EXPECT_TRUE(t.grad().defined()) << name;
}

TEST(ModuleInputs, TwoInputsThroughDdpOnOneRank) {
  auto m = std::make_shared<TwoInput>(5);
  Data d = data(6, 6);
  Direct want = direct(*m, d);
  auto comm = comm::make_local_group(1)[0];
  nn::parallel::DistributedDataParallel ddp(m, comm);
  std::vector<Tensor> outs = ddp.forward_many({d.x, d.z});
  loss_of(outs, d).backward();
  ddp.finalize();
  expect_matches(outs, *m, want, "DDP");
  // forward(x) of a two-input module: the module's own error, through DDP.
  EXPECT_NE(error_of<ValueError>([&] { ddp.forward(d.x); }).find("TwoInput takes (x, z), got 1"), std::string::npos);
}

TEST(ModuleInputs, TwoInputsThroughDataParallel) {
  for (int64_t rows : {7, 1}) {  // an uneven split, and fewer rows than devices
    auto m = std::make_shared<TwoInput>(7);
    Data d = data(rows, 8 + static_cast<uint64_t>(rows));
    Direct want = direct(*m, d);
    nn::parallel::DataParallel dp(m, {Device(DeviceKind::CPU, 0), Device(DeviceKind::CPU, 1)});
    std::vector<Tensor> outs = dp.forward_many({d.x, d.z});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].shape(), (Shape{rows, 4}));
    EXPECT_EQ(outs[1].shape(), (Shape{rows, 2}));
    loss_of(outs, d).backward();
    expect_matches(outs, *m, want, "DataParallel, " + std::to_string(rows) + " rows");
  }
  // Inputs of different batch sizes cannot be split alike.
  auto m = std::make_shared<TwoInput>(7);
  nn::parallel::DataParallel dp(m, {Device(DeviceKind::CPU, 0), Device(DeviceKind::CPU, 1)});
  const std::string msg = error_of<ValueError>([&] { dp.forward_many({data(4, 1).x, data(3, 1).z}); });
  EXPECT_NE(msg.find("input 1 has 3 rows but input 0 has 4"), std::string::npos) << msg;
}

TEST(ModuleInputs, WrongNumberOfInputsSaysSo) {
  nn::Linear lin(3, 2);
  Data d = data(2, 1);
  const std::string msg = error_of<ValueError>([&] { lin.forward_many({d.x, d.x}); });
  EXPECT_NE(msg.find("Linear takes one input"), std::string::npos) << msg;
  EXPECT_EQ(lin.forward_many({d.x}).at(0).to_vector<double>(), lin.forward(d.x).to_vector<double>());
  Neither n;
  const std::string nmsg = error_of<ValueError>([&] { n.forward(d.x); });
  EXPECT_NE(nmsg.find("Neither overrides neither forward(x) nor forward_many(inputs)"), std::string::npos) << nmsg;
}

}  // namespace
}  // namespace tandem::testing
