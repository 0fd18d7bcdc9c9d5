// Weight tying: the gradient of a table used by the embedding and the output projection is the sum
// of both uses; a tensor registered in two modules is one parameter (named_parameters, optimizers).
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "nn/optim.h"
#include "tests/ops_attn/tied_lm.h"
#include "tests/support/gradcheck.h"

namespace tandem::testing {
namespace {

TEST(WeightTying, GradientIsTheSumOfBothUses) {
  TiedLM m(11, 6, 1, DType::f64);
  Tensor ids = token_ids(9, 11, 2), target = token_ids(9, 11, 3);
  Tensor wte = m.param("wte"), w = m.param("w");
  ops::cross_entropy(m.forward(ids), target).backward();
  // The same function with the two uses on separate copies of the table.
  Tensor we = wte.detach().clone(), wh = wte.detach().clone();
  we.set_requires_grad(true);
  wh.set_requires_grad(true);
  Tensor logits = ops::linear(ops::tanh(ops::linear(ops::embedding(ids, we), w.detach())), wh);
  auto g = grad({ops::cross_entropy(logits, target)}, {we, wh});
  std::vector<double> want = g[0].to_vector<double>(), gh = g[1].to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) want[i] += gh[i];
  expect_close(wte.grad(), want, 1e-14, 1e-12);
  double emb_part = 0;
  for (double x : g[0].to_vector<double>()) emb_part += std::abs(x);
  EXPECT_GT(emb_part, 0.0);  // both uses contribute
}

// The tied head is linear's x W^T: the graph from the logits back to the table holds GEMM nodes
// (LinearBackward, EmbeddingBackward) and no transpose or permute copy.
TEST(WeightTying, HeadHasNoTransposeCopy) {
  TiedLM m(11, 6, 1);
  Tensor logits = m.forward(token_ids(5, 11, 2));
  std::vector<std::string> names;
  std::vector<const Node*> todo{logits.grad_fn().get()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    names.push_back(n->name());
    for (const Edge& e : n->next_edges())
      if (e.fn) todo.push_back(e.fn.get());
  }
  for (const std::string& n : names) {
    EXPECT_EQ(n.find("Transpose"), std::string::npos) << n;
    EXPECT_EQ(n.find("Permute"), std::string::npos) << n;
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "LinearBackward"), names.end());
}

TEST(WeightTying, Gradcheck) {
  Tensor ids = token_ids(7, 5, 4);
  Tensor wte = random_leaf({5, 3}, 5), w = random_leaf({3, 3}, 6);
  expect_gradcheck([&](const std::vector<Tensor>& t) {
    return ops::linear(ops::tanh(ops::linear(ops::embedding(ids, t[0]), t[1])), t[0]);
  }, {wte, w});
}

TEST(WeightTying, TensorInTwoModulesIsOneParameter) {
  SharedTableLM m(13, 4, 7);
  auto named = m.named_parameters();
  ASSERT_EQ(named.size(), 2u);  // emb.weight (= head.weight) and mid.weight
  EXPECT_EQ(named[0].first, "emb.weight");
  EXPECT_EQ(named[1].first, "mid.weight");
  EXPECT_TRUE(m.parameters()[0].is_same(m.children()[2].second->param("weight")));
  EXPECT_EQ(m.state_dict().size(), 2u);

  // One SGD step through parameters() moves the shared table once, by the summed gradient.
  Tensor ids = token_ids(10, 13, 8), target = token_ids(10, 13, 9);
  Tensor before = m.parameters()[0].detach().clone();
  nn::SGDOptions o;
  o.lr = 0.5;
  nn::SGD opt(m.parameters(), o);
  opt.zero_grad();
  ops::cross_entropy(m.forward(ids), target).backward();
  std::vector<double> g = m.parameters()[0].grad().to_vector<double>(), b = before.to_vector<double>();
  opt.step();
  std::vector<double> after = m.parameters()[0].to_vector<double>();
  for (size_t i = 0; i < b.size(); ++i) ASSERT_NEAR(after[i], b[i] - 0.5 * g[i], 1e-6) << i;
}

}  // namespace
}  // namespace tandem::testing
