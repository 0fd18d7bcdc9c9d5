// Cloneable::clone of modules that keep their children and parameters in members: built in
// reset(), a clone is independent (its own values, gradients, dtype, device, training flags) and
// DataParallel's replicas train as the module alone; without reset(), clone() throws the error that
// says how to fix the module; and the registry-only modules of the tree still clone, unflagged.
#include <gtest/gtest.h>

#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/parallel/data_parallel.h"
#include "runtime/ops.h"
#include "tests/ops_attn/tied_lm.h"
#include "tests/support/error_of.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {

// Children and a parameter held in members, built in reset() (the PyTorch C++ way).
class ResetNet : public nn::Cloneable<ResetNet> {
 public:
  explicit ResetNet(uint64_t seed = 5) : seed_(seed) { reset(); }
  void reset() override {
    Generator gen(seed_);
    a = register_module("a", std::make_shared<nn::Linear>(4, 8, true, gen));
    b = register_module("b", std::make_shared<nn::Linear>(8, 3, true, gen));
    scale = register_parameter("scale", rand_uniform({3}, 0.5, 1.5, gen));
  }
  // x [N, 4] -> [N, 3]
  Tensor forward(const Tensor& x) override { return b->forward(ops::relu(a->forward(x))) * scale; }
  std::string type_name() const override { return "ResetNet"; }

  std::shared_ptr<nn::Linear> a, b;
  Tensor scale;

 private:
  uint64_t seed_;
};

// The same in the constructor: a copy's members would still point at the original's.
class MemberNet : public nn::Cloneable<MemberNet> {
 public:
  MemberNet() {
    a = register_module("a", std::make_shared<nn::Linear>(4, 8));
    b = register_module("b", std::make_shared<nn::Linear>(8, 3));
  }
  Tensor forward(const Tensor& x) override { return b->forward(ops::relu(a->forward(x))); }
  std::string type_name() const override { return "MemberNet"; }
  std::shared_ptr<nn::Linear> a, b;
};

class TensorMemberNet : public nn::Cloneable<TensorMemberNet> {
 public:
  TensorMemberNet() { w = register_parameter("w", Tensor::ones({3, 4})); }
  Tensor forward(const Tensor& x) override { return ops::linear(x, w, Tensor()); }
  std::string type_name() const override { return "TensorMemberNet"; }
  Tensor w;
};

// reset() builds a and b, the constructor one more child: reset() cannot rebuild the copy.
class HalfResetNet : public nn::Cloneable<HalfResetNet> {
 public:
  HalfResetNet() {
    reset();
    c = register_module("c", std::make_shared<nn::Linear>(3, 3));
  }
  void reset() override { a = register_module("a", std::make_shared<nn::Linear>(4, 3)); }
  Tensor forward(const Tensor& x) override { return c->forward(a->forward(x)); }
  std::string type_name() const override { return "HalfResetNet"; }
  std::shared_ptr<nn::Linear> a, c;
};

Tensor input(uint64_t seed, int64_t rows = 6) {
  Generator gen(seed);
  return rand_normal({rows, 4}, 0.0, 1.0, gen);
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(ModuleClone, ResetNetCloneHasTheSameValuesInItsOwnTensors) {
  ResetNet net(11);
  Generator other(99);
  net.a->reset_parameters(other);  // values the constructor's seed would not give back
  const uint64_t offset = default_generator().offset();
  auto copy = std::static_pointer_cast<ResetNet>(net.clone());
  EXPECT_EQ(default_generator().offset(), offset);  // reset()'s draws leave no trace
  // The members are the copy's own registered children and parameter.
  EXPECT_EQ(copy->a.get(), copy->children()[0].second.get());
  EXPECT_EQ(copy->b.get(), copy->children()[1].second.get());
  EXPECT_NE(copy->a.get(), net.a.get());
  EXPECT_TRUE(copy->scale.is_same(copy->param("scale")));
  auto mine = net.state_dict(), theirs = copy->state_dict();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(theirs[i].first, mine[i].first);
    EXPECT_FALSE(theirs[i].second.is_same(mine[i].second)) << mine[i].first;
    EXPECT_NE(theirs[i].second.data_ptr(), mine[i].second.data_ptr()) << mine[i].first;
    EXPECT_EQ(values(theirs[i].second), values(mine[i].second)) << mine[i].first;
    EXPECT_TRUE(theirs[i].second.requires_grad()) << mine[i].first;
  }
  Tensor x = input(3);
  EXPECT_EQ(values(copy->forward(x)), values(net.forward(x)));
}

TEST(ModuleClone, ZeroingTheCloneLeavesTheOriginal) {
  ResetNet net(12);
  auto copy = net.clone();
  Tensor x = input(4);
  const std::vector<double> before = values(net.forward(x));
  {
    NoGradGuard no_grad;
    for (Tensor& p : copy->parameters()) p.zero_();
  }
  EXPECT_EQ(values(net.forward(x)), before);
  for (double v : values(copy->forward(x))) EXPECT_EQ(v, 0.0);
}

TEST(ModuleClone, GradientsFlowToTheClonesOwnParameters) {
  ResetNet net(13);
  auto copy = std::static_pointer_cast<ResetNet>(net.clone());
  ops::sum(copy->forward(input(5))).backward();
  for (auto& [name, p] : copy->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  for (auto& [name, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  EXPECT_TRUE(copy->a->param("weight").grad().defined());
}

TEST(ModuleClone, KeepsDtypeDeviceAndTrainingFlags) {
  ResetNet net(14);
  net.to(DType::f64);
  net.to(Device(DeviceKind::CPU, 1));
  net.eval();
  net.b->train();
  auto copy = std::static_pointer_cast<ResetNet>(net.clone());
  for (auto& [name, p] : copy->state_dict()) {
    EXPECT_EQ(p.dtype(), DType::f64) << name;
    EXPECT_EQ(p.device(), Device(DeviceKind::CPU, 1)) << name;
  }
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE(copy->a->is_training());
  EXPECT_TRUE(copy->b->is_training());
  Tensor x = ops::cast(input(6), DType::f64).to(Device(DeviceKind::CPU, 1));
  EXPECT_EQ(values(copy->forward(x)), values(net.forward(x)));
}

TEST(ModuleClone, MemberChildrenWithoutResetThrowTheFix) {
  MemberNet net;
  const std::string msg = error_of<ValueError>([&] { net.clone(); });
  for (const char* needle : {"MemberNet", "'a'", "'b'", "void reset() override", "constructor"})
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in: " << msg;
  // The original is untouched by the failed clone.
  EXPECT_EQ(net.a.get(), net.children()[0].second.get());

  TensorMemberNet tnet;
  const std::string tmsg = error_of<ValueError>([&] { tnet.clone(); });
  for (const char* needle : {"TensorMemberNet", "tensor 'w'", "reset()"})
    EXPECT_NE(tmsg.find(needle), std::string::npos) << "'" << needle << "' not in: " << tmsg;
}

TEST(ModuleClone, ResetThatMissesAChildThrows) {
  HalfResetNet net;
  const std::string msg = error_of<ValueError>([&] { net.clone(); });
  for (const char* needle : {"HalfResetNet", "reset()", "'c'"})
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in: " << msg;
}

// The tree's registry-only modules: each clone runs its own tensors and the check stays quiet.
TEST(ModuleClone, RegistryModulesCloneWithoutFalseAlarms) {
  Generator gen(7);
  auto layers = std::make_shared<nn::Sequential>();
  layers->push_back(std::make_shared<nn::LayerNorm>(Shape{4}));
  layers->push_back(std::make_shared<nn::Dropout>(0.1));
  layers->push_back(std::make_shared<nn::GELU>());
  layers->push_back(std::make_shared<nn::Identity>());
  layers->push_back(std::make_shared<nn::Embedding>(5, 4, gen));
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> modules = {
      {"mlp", nn::make_mlp(gen)},
      {"cnn", nn::make_cnn(gen)},
      {"gpt", std::make_shared<nn::GPT>(nn::GPTConfig::preset("tiny"), gen)},
      {"tied", std::make_shared<TiedLM>(11, 6, 3)},
      {"shared_table", std::make_shared<SharedTableLM>(11, 6, 3)},
      {"layers", layers}};
  for (auto& [what, m] : modules) {
    std::shared_ptr<nn::Module> copy;
    ASSERT_NO_THROW(copy = m->clone()) << what;
    auto mine = m->state_dict(), theirs = copy->state_dict();
    ASSERT_EQ(mine.size(), theirs.size()) << what;
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_FALSE(theirs[i].second.is_same(mine[i].second)) << what << " " << mine[i].first;
      EXPECT_EQ(values(theirs[i].second), values(mine[i].second)) << what << " " << mine[i].first;
    }
  }
}

// DataParallel's replicas are clones: the reset()-style net over cpu:0 and cpu:1 gives the loss
// and gradients of the net alone.
TEST(ModuleClone, DataParallelOfAResetNetMatchesTheSingleModule) {
  auto ref = std::make_shared<ResetNet>(21);
  auto model = std::make_shared<ResetNet>(21);
  nn::parallel::DataParallel dp(model, {Device(DeviceKind::CPU, 0), Device(DeviceKind::CPU, 1)});
  auto replica = std::static_pointer_cast<ResetNet>(dp.replica(1));
  EXPECT_NE(replica->a.get(), model->a.get());
  EXPECT_EQ(replica->a->param("weight").device(), Device(DeviceKind::CPU, 1));
  for (int step = 0; step < 2; ++step) {
    Tensor x = input(30 + static_cast<uint64_t>(step), 7);
    Tensor y = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 1}, {7});
    for (Tensor& p : ref->parameters()) p.set_grad(Tensor());
    for (Tensor& p : dp.parameters()) p.set_grad(Tensor());
    Tensor loss_ref = ops::cross_entropy(ref->forward(x), y);
    loss_ref.backward();
    Tensor loss = ops::cross_entropy(dp.forward(x), y);
    loss.backward();
    EXPECT_NEAR(loss.item(), loss_ref.item(), 1e-6);
    auto got = model->named_parameters(), want = ref->named_parameters();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].second.grad(), want[i].second.grad(), 1e-6, 1e-5);
  }
}

TEST(ModuleClone, DataParallelOfAMemberNetSaysHowToFixIt) {
  auto model = std::make_shared<MemberNet>();
  const std::string msg = error_of<ValueError>(
      [&] { nn::parallel::DataParallel dp(model, {Device(DeviceKind::CPU, 0), Device(DeviceKind::CPU, 1)}); });
  EXPECT_NE(msg.find("void reset() override"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tandem::testing
