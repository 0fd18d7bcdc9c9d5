// resmlp (nn/models/resmlp.cpp): its registry entry, its config, its forward against the formula, its
// gradient, its FLOP count, its clone.
#include <gtest/gtest.h>

#include "../support/error_of.h"
#include "../support/gradcheck.h"
#include "nn/config/run_config.h"
#include "nn/model_registry.h"
#include "runtime/autograd.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/matmul.h"

namespace tandem {
namespace {

using nn::config::ModelConfig;

nn::config::RunConfig parse(const std::string& parameters) {
  return nn::config::parse_run_config("model:\n  type: resmlp\n  parameters: " + parameters + "\n");
}

TEST(ResMLP, RegisteredForTandemTrain) {
  const nn::ModelEntry& e = nn::model_entry("ResMLP");  // any case
  EXPECT_EQ(e.type, "resmlp");
  EXPECT_EQ(e.input, nn::ModelInput::Flat);
  EXPECT_EQ(e.dataset, "fashion-mnist");
  const auto types = nn::model_types("fashion-mnist");
  EXPECT_NE(std::find(types.begin(), types.end(), "resmlp"), types.end());
}

TEST(ResMLP, ParametersFromTheFileAndTheirNames) {
  const auto rc = parse("{hidden: 16, blocks: 3}");
  Generator gen(0);
  auto m = nn::config::build_model(rc.model, gen);
  std::vector<std::pair<std::string, Shape>> got;
  for (const auto& [n, t] : m->named_parameters()) got.emplace_back(n, t.shape());
  ASSERT_EQ(got.size(), 2u + 3u * 4u + 2u);
  EXPECT_EQ(got.front(), (std::pair<std::string, Shape>{"input.weight", {16, 784}}));
  EXPECT_EQ(got[2], (std::pair<std::string, Shape>{"block0.0.weight", {16, 16}}));
  EXPECT_EQ(got[4], (std::pair<std::string, Shape>{"block0.2.weight", {16, 16}}));
  EXPECT_EQ(got[got.size() - 2], (std::pair<std::string, Shape>{"output.weight", {10, 16}}));
  EXPECT_EQ(m->forward(Tensor::zeros({5, 784})).shape(), (Shape{5, 10}));
  // The defaults (tandem-train's --model resmlp): hidden 256, 2 blocks.
  auto d = nn::config::build_model(nn::default_model_config("resmlp"), gen);
  EXPECT_EQ(d->named_parameters().front().second.shape(), (Shape{256, 784}));
  EXPECT_EQ(d->named_parameters().size(), 2u + 2u * 4u + 2u);
}

TEST(ResMLP, BadParametersNameTheKey) {
  EXPECT_NE(testing::error_of([] { parse("{hiden: 16}"); }).find("did you mean 'hidden'?"), std::string::npos);
  EXPECT_NE(testing::error_of([] { parse("{blocks: -1}"); }).find("model.parameters.blocks: must be in [0, 1024], got -1"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { parse("{hidden: 1.5}"); }).find("must be a whole number"), std::string::npos);
  EXPECT_NE(testing::error_of([] { nn::config::parse_run_config("model: {type: resmpl}\n"); }).find("did you mean resmlp?"),
            std::string::npos);
}

// The formula, written with ops: relu(x W^T + b), then h = relu(h + block(h)), then the output layer.
Tensor by_formula(nn::Module& m, const Tensor& x, int64_t blocks) {
  auto p = [&](const std::string& n) {
    for (auto& [name, t] : m.named_parameters())
      if (name == n) return t;
    ADD_FAILURE() << "no parameter " << n;
    return Tensor();
  };
  Tensor h = ops::relu(ops::linear(x, p("input.weight"), p("input.bias")));
  for (int64_t b = 0; b < blocks; ++b) {
    const std::string k = "block" + std::to_string(b) + ".";
    Tensor inner = ops::relu(ops::linear(h, p(k + "0.weight"), p(k + "0.bias")));
    h = ops::relu(ops::add(h, ops::linear(inner, p(k + "2.weight"), p(k + "2.bias"))));
  }
  return ops::linear(h, p("output.weight"), p("output.bias"));
}

TEST(ResMLP, ForwardIsTheFormulaAndItsGradientChecks) {
  ModelConfig c;
  c.type = "resmlp";
  c.values = {{"in_features", 3}, {"hidden", 4}, {"blocks", 2}, {"out_features", 2}};
  Generator gen(7);
  auto m = nn::config::build_model(c, gen);
  m->to(DType::f64);
  Tensor x = testing::random_leaf({5, 3}, 11);
  const auto got = m->forward(x).to_vector<double>(), want = by_formula(*m, x, 2).to_vector<double>();
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << i;
  testing::expect_gradcheck([&](const std::vector<Tensor>& in) { return m->forward(in[0]); }, {x});
}

TEST(ResMLP, FlopsPerSample) {
  ModelConfig c;
  c.type = "resmlp";
  c.values = {{"hidden", 16}, {"blocks", 3}};
  EXPECT_EQ(nn::model_entry("resmlp").flops_per_sample(c), 3.0 * 2.0 * (784 * 16 + 3 * 2 * 16 * 16 + 16 * 10));
}

TEST(ResMLP, CloneRunsItsOwnBlocks) {
  Generator gen(3);
  auto m = nn::config::build_model(parse("{hidden: 8, blocks: 1}").model, gen);
  Tensor x = Tensor::ones({2, 784});
  const auto before = m->forward(x).to_vector<float>();
  auto c = m->clone();
  EXPECT_EQ(c->forward(x).to_vector<float>(), before);
  for (Tensor& p : c->parameters()) p.detach().zero_();
  EXPECT_EQ(m->forward(x).to_vector<float>(), before);
  for (float v : c->forward(x).to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tandem
