// Gradient checkpointing: checkpointed gradients equal the plain ones (with dropout, whose masks
// are replayed through the Philox offset; with BatchNorm, whose running statistics are updated
// once), for checkpoint() and checkpoint_sequential, and the generator ends where it would.
#include <gtest/gtest.h>

#include <cstring>

#include "nn/checkpoint_sequential.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
std::shared_ptr<Sequential> make_net(uint64_t seed) {
  Generator g(seed);
  auto s = std::make_shared<Sequential>();
  s->emplace_back<Linear>(12, 16, true, g);
  s->emplace_back<ReLU>();
  s->emplace_back<Dropout>(0.3);
  s->emplace_back<Linear>(16, 16, true, g);
  s->emplace_back<GELU>();
  s->emplace_back<Dropout>(0.2);
  s->emplace_back<Linear>(16, 16, true, g);
  s->emplace_back<ReLU>();
  s->emplace_back<Linear>(16, 4, true, g);
  return s;
}

struct Grads {
  std::vector<std::vector<float>> params;
  std::vector<float> input;
  uint64_t offset_after = 0;
};

Grads run(Sequential& net, const std::function<Tensor(const Tensor&)>& forward, bool input_grad) {
  net.zero_grad();
  Generator g(7);
  Tensor x = rand_uniform({5, 12}, -1.0, 1.0, g);
  if (input_grad) x.set_requires_grad(true);
  manual_seed(1234);
  default_generator().set_state(1234, 10);
  Tensor loss = ops::sum(ops::mul(forward(x), forward(x)));  // two passes: two sets of draws
  loss.backward();
  Grads out;
  for (const Tensor& p : net.parameters()) out.params.push_back(p.grad().to_vector<float>());
  if (input_grad) out.input = x.grad().to_vector<float>();
  out.offset_after = default_generator().offset();
  return out;
}

void expect_equal(const Grads& a, const Grads& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_EQ(a.params[i], b.params[i]) << "parameter " << i;
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.offset_after, b.offset_after);
}
}  // namespace

TEST(CheckpointActivations, SequentialEqualsPlainWithDropout) {
  for (bool input_grad : {false, true}) {
    auto net = make_net(3);
    Grads plain = run(*net, [&](const Tensor& x) { return net->forward(x); }, input_grad);
    for (int segments : {1, 2, 3, 9}) {
      SCOPED_TRACE(segments);
      Grads ck = run(*net, [&](const Tensor& x) { return checkpoint_sequential(*net, segments, x); }, input_grad);
      expect_equal(plain, ck);
    }
  }
}

TEST(CheckpointActivations, FunctionWithSeveralInputsAndOutputs) {
  Generator g(5);
  Tensor a = rand_uniform({3, 4}, -1, 1, g), b = rand_uniform({3, 4}, -1, 1, g);
  Tensor w = rand_uniform({4, 4}, -1, 1, g);
  for (Tensor* t : {&a, &b, &w}) t->set_requires_grad(true);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor h = ops::tanh(ops::matmul(ops::add(in[0], in[1]), w));
    return std::vector<Tensor>{ops::dropout(h, 0.5, true), ops::mul(h, in[1])};
  };
  auto loss_of = [&](const std::vector<Tensor>& o) { return ops::add(ops::sum(ops::exp(o[0])), ops::sum(o[1])); };
  default_generator().set_state(9, 0);
  loss_of(fn({a, b})).backward();
  std::vector<std::vector<float>> plain = {a.grad().to_vector<float>(), b.grad().to_vector<float>(),
                                           w.grad().to_vector<float>()};
  for (Tensor* t : {&a, &b, &w}) t->grad().zero_();
  default_generator().set_state(9, 0);
  std::vector<Tensor> out = checkpoint(fn, {a, b});
  EXPECT_FALSE(out[0].grad_fn() == nullptr);
  loss_of(out).backward();
  EXPECT_EQ(a.grad().to_vector<float>(), plain[0]);
  EXPECT_EQ(b.grad().to_vector<float>(), plain[1]);
  EXPECT_EQ(w.grad().to_vector<float>(), plain[2]);
}

TEST(CheckpointActivations, CnnWithBatchNormUnderAutocast) {
  for (bool amp : {false, true}) {
    SCOPED_TRACE(amp ? "bf16" : "f32");
    Generator g1(11), g2(11);
    auto plain = make_cnn(g1), ck = make_cnn(g2);
    Generator gx(2);
    Tensor x = rand_uniform({4, 1, 28, 28}, 0, 1, gx);
    Tensor y = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4});
    auto step = [&](Sequential& net, bool use_ck) {
      std::optional<AutocastGuard> ac;
      if (amp) ac.emplace(DType::bf16);
      Tensor logits = use_ck ? checkpoint_sequential(net, 3, x) : net.forward(x);
      ac.reset();
      ops::cross_entropy(logits, y).backward();
    };
    step(*plain, false);
    step(*ck, true);
    auto pp = plain->named_parameters(), pc = ck->named_parameters();
    for (size_t i = 0; i < pp.size(); ++i)
      EXPECT_EQ(pp[i].second.grad().to_vector<float>(), pc[i].second.grad().to_vector<float>()) << pp[i].first;
    auto bp = plain->named_buffers(), bc = ck->named_buffers();
    for (size_t i = 0; i < bp.size(); ++i)
      EXPECT_EQ(bp[i].second.to_vector<double>(), bc[i].second.to_vector<double>())
          << bp[i].first << ": running statistics updated once";
  }
}

TEST(CheckpointActivations, NoGradIsAPlainForward) {
  auto net = make_net(4);
  NoGradGuard ng;
  Tensor x = Tensor::ones({2, 12});
  net->eval();
  EXPECT_EQ(checkpoint_sequential(*net, 2, x).to_vector<float>(), net->forward(x).to_vector<float>());
}
