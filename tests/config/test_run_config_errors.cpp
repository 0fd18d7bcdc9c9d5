// Every kind of run-config error is a ValueError naming the file, the 1-based line and the key path:
// unknown keys (top level, nested, another type's), wrong types, missing keys, values out of range,
// YAML syntax, a missing file; and for a config built in code, the key path alone.
#include <gtest/gtest.h>

#include <fstream>

#include "nn/config/run_config.h"
#include "tests/config/config_test_util.h"
#include "tests/data/temp_dir.h"

using namespace tandem;
using namespace tandem::nn::config;
using tandem::testing::expect_contains;
using tandem::testing::line_in;
using tandem::testing::value_error_of;

namespace {

const std::string kMlp = "model:\n  type: mlp\n  parameters:\n    layer_sizes: [2, 8, 1]\n";

// The error of parsing `text` as run.yaml must start "run.yaml:<line of `at`>: <path>: " and hold `what`.
void expect_error(const std::string& text, const std::string& at, const std::string& path, const std::string& what) {
  SCOPED_TRACE(text);
  const int line = line_in(text, at);
  ASSERT_GT(line, 0) << "'" << at << "' is not in the text";
  const std::string msg = value_error_of([&] { parse_run_config(text, "run.yaml"); });
  const std::string head = "run.yaml:" + std::to_string(line) + ": " + path + ": ";
  EXPECT_EQ(msg.rfind(head, 0), 0u) << "expected '" << head << "...', got: " << msg;
  expect_contains(msg, {what});
}

}  // namespace

TEST(RunConfigErrors, UnknownKeys) {
  expect_error("modle:\n  type: mlp\n", "modle", "modle",
               "unknown key for a run config (expected one of general, model");
  expect_error(kMlp + "optimizer:\n  type: adam\n  parameters:\n    learning_rat: 0.1\n", "learning_rat",
               "optimizer.parameters.learning_rat",
               "unknown key for optimizer type adam (expected one of learning_rate, beta1, beta2, eps, weight_decay, "
               "amsgrad, fused); did you mean 'learning_rate'?");
  // Another optimizer's parameter is no parameter of this one.
  expect_error(kMlp + "optimizer:\n  type: adam\n  parameters: {momentum: 0.9}\n", "momentum",
               "optimizer.parameters.momentum", "unknown key for optimizer type adam");
  expect_error(kMlp + "training:\n  grad_clip: 1\n  acumulation_steps: 2\n", "acumulation_steps",
               "training.acumulation_steps", "did you mean 'accumulation_steps'?");
  expect_error("model:\n  type: cnn\n  parameters: {layer_sizes: [1, 2]}\n", "layer_sizes",
               "model.parameters.layer_sizes", "unknown key (model type cnn takes no parameters)");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: linear, in_features: 2,"
               " out_feature: 1}\n", "out_feature", "model.parameters.layers[0].out_feature",
               "unknown argument of linear (expected in_features, out_features, bias)");
  expect_error(kMlp + "model2: {}\n", "model2", "model2", "unknown key");
  expect_error(kMlp + "ddp:\n  bucket_cap_mb: 4\n  bucket_cap_mb: 8\n", "bucket_cap_mb: 8", "ddp.bucket_cap_mb",
               "given twice (first at line 6)");
}

TEST(RunConfigErrors, WrongTypes) {
  expect_error("model:\n  type: mlp\n  parameters:\n    layer_sizes: abc\n", "layer_sizes",
               "model.parameters.layer_sizes", "expected a list of integers, got a string ('abc')");
  expect_error("model:\n  type: mlp\n  parameters:\n    layer_sizes:\n      - 2\n      - 2.5\n      - 1\n", "2.5",
               "model.parameters.layer_sizes[1]", "expected an integer, got 2.5");
  expect_error(kMlp + "optimizer:\n  type: sgd\n  parameters:\n    nesterov: maybe\n", "nesterov",
               "optimizer.parameters.nesterov", "expected true or false, got a string ('maybe')");
  expect_error(kMlp + "optimizer:\n  type: sgd\n  parameters:\n    learning_rate: [0.1]\n", "learning_rate",
               "optimizer.parameters.learning_rate", "expected a number, got a list");
  expect_error(kMlp + "training:\n  seed: 1.5\n", "seed", "training.seed", "expected an integer, got 1.5");
  expect_error("model: mlp\n", "model", "model", "expected a mapping (key: value lines), got a string ('mlp')");
  expect_error(kMlp + "loss:\n  type: [mse]\n", "type: [mse]", "loss.type", "expected a word, got a list");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: gelu, approximate: fast}\n",
               "approximate", "model.parameters.layers[0].approximate", "expected one of none, tanh, got 'fast'");
}

TEST(RunConfigErrors, MissingKeys) {
  // A whole block missing has no line; a key missing inside a block points at the block.
  const std::string msg = value_error_of([] { parse_run_config("loss: {type: mse}\n", "run.yaml"); });
  EXPECT_EQ(msg.rfind("run.yaml: model: required key missing", 0), 0u) << msg;
  expect_error("\nmodel:\n  parameters: {layer_sizes: [1, 1]}\n", "model", "model.type",
               "required key missing (cnn, gpt, mlp, onnx, resmlp or sequential)");
  expect_error("model:\n  type: mlp\n  parameters: {dropout: 0.1}\n", "parameters", "model.parameters.layer_sizes",
               "required key missing");
  expect_error("model:\n  type: mlp\n", "model", "model.parameters.layer_sizes", "required key missing");
  expect_error(kMlp + "lr_scheduler:\n  type: step\n  parameters: {gamma: 0.5}\n", "parameters: {gamma",
               "lr_scheduler.parameters.step_size", "required key missing");
  expect_error(kMlp + "lr_scheduler:\n  type: cosine_annealing\n", "lr_scheduler", "lr_scheduler.parameters.T_max",
               "required key missing (the steps to anneal over)");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: relu}\n"
               "      - {type: linear, out_features: 3}\n", "{type: linear", "model.parameters.layers[1].in_features",
               "required key missing (linear needs in_features and out_features)");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {in_features: 3}\n", "in_features",
               "model.parameters.layers[0].type", "required key missing");
}

TEST(RunConfigErrors, BadValues) {
  expect_error(kMlp + "optimizer:\n  type: adam\n  parameters:\n    learning_rate: -0.1\n", "learning_rate",
               "optimizer.parameters.learning_rate", "must be > 0, got -0.1");
  expect_error("model:\n  type: mlp\n  parameters:\n    layer_sizes: [2, 0, 1]\n", "layer_sizes",
               "model.parameters.layer_sizes[1]", "must be >= 1, got 0");
  expect_error("model:\n  type: mlp\n  parameters:\n    layer_sizes: [2]\n", "layer_sizes",
               "model.parameters.layer_sizes", "needs at least 2 sizes");
  expect_error("model:\n  type: mlp\n  parameters:\n    layer_sizes: [2, 1]\n    dropout: 1.0\n", "dropout",
               "model.parameters.dropout", "must be in [0, 1), got 1");
  expect_error(kMlp + "training:\n  accumulation_steps: 0\n", "accumulation_steps", "training.accumulation_steps",
               "must be >= 1, got 0");
  expect_error(kMlp + "training:\n  amp: fp8\n", "amp", "training.amp", "unknown amp setting 'fp8' (expected off, f16 or bf16)");
  expect_error(kMlp + "ddp:\n  bucket_cap_mb: 0\n", "bucket_cap_mb", "ddp.bucket_cap_mb", "must be > 0, got 0");
  expect_error(kMlp + "ddp:\n  zero_stage: 3\n", "zero_stage", "ddp.zero_stage", "must be 0, 1 or 2, got 3");
  expect_error(kMlp + "optimizer:\n  type: rmsprop\n", "rmsprop", "optimizer.type",
               "unknown optimizer type 'rmsprop' (expected sgd, adam or adamw)");
  expect_error(kMlp + "optimizer:\n  type: adam\n  parameters: {amsgrad: true}\n", "amsgrad",
               "optimizer.parameters.amsgrad", "not supported");
  expect_error(kMlp + "optimizer:\n  type: sgd\n  parameters: {nesterov: true}\n", "nesterov",
               "optimizer.parameters.nesterov", "needs momentum > 0 and dampening 0");
  expect_error(kMlp + "loss:\n  type: huber\n", "huber", "loss.type", "unknown loss type 'huber'");
  expect_error(kMlp + "loss:\n  type: l1\n  parameters:\n    reduction: avg\n", "reduction",
               "loss.parameters.reduction", "unknown reduction 'avg' (expected mean, sum or none)");
  expect_error(kMlp + "lr_scheduler: {type: polynomial, parameters: {total_iters: 10}}\n", "lr_scheduler",
               "lr_scheduler.type", "TorchFort's polynomial schedule is not supported");
  expect_error(kMlp + "lr_scheduler:\n  type: linear_warmup\n  parameters: {warmup_steps: 3, start_factor: 0}\n",
               "parameters: {warmup", "lr_scheduler.parameters.start_factor", "must be in (0, 1], got 0");
  expect_error("model:\n  type: torchscript\n", "torchscript", "model.type", "TorchScript models are not supported");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: conv3d}\n", "conv3d",
               "model.parameters.layers[0].type", "unknown layer type 'conv3d' (expected one of linear, conv2d");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n"
               "      - {type: conv2d, in_channels: 1, out_channels: 2, kernel_size: [3, 5]}\n", "kernel_size",
               "model.parameters.layers[0].kernel_size", "tandem's conv2d is square");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: dropout, p: 1.5}\n", "p: 1.5",
               "model.parameters.layers[0].p", "must be in [0, 1), got 1.5");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers:\n      - {type: linear, in_features: 2.5, "
               "out_features: 1}\n", "in_features", "model.parameters.layers[0].in_features",
               "expected an integer, got 2.5");
  expect_error("model:\n  type: sequential\n  parameters:\n    layers: []\n", "layers",
               "model.parameters.layers", "got an empty list");
  expect_error("model:\n  type: gpt\n  parameters:\n    n_embd: 30\n    n_head: 4\n", "n_head",
               "model.parameters.n_head", "must divide n_embd (30), got 4");
  expect_error("model:\n  type: gpt\n  parameters:\n    n_layer: 0\n", "n_layer", "model.parameters.n_layer",
               "must be >= 1, got 0");
  expect_error("model:\n  type: gpt\n  parameters:\n    layers: 2\n", "layers", "model.parameters.layers",
               "model type gpt");
  expect_error("model:\n  type: transformer\n", "transformer", "model.type",
               "unknown model type 'transformer' (expected cnn, gpt, mlp, onnx, resmlp or sequential)");
}

TEST(RunConfigErrors, YamlSyntaxAndDocuments) {
  // An unclosed flow list: yaml-cpp reports where it gave up, on the line of the bad value.
  const std::string text = "model:\n  type: mlp\n  parameters:\n    layer_sizes: [2, 8\n";
  const std::string msg = value_error_of([&] { parse_run_config(text, "run.yaml"); });
  expect_contains(msg, {"run.yaml:", "YAML syntax error"});
  EXPECT_EQ(msg.rfind("run.yaml:4: YAML syntax error", 0), 0u) << msg;

  const std::string indent = "model:\n  type: mlp\n  parameters: {layer_sizes: [2, 1]}\n    optimizer: adam\n"
                             "loss: {type: mse}\n";
  expect_contains(value_error_of([&] { parse_run_config(indent, "indent.yaml"); }),
                  {"indent.yaml:4: YAML syntax error"});
  const std::string tab = "model:\n  type: mlp\n\tparameters: {}\n";
  expect_contains(value_error_of([&] { parse_run_config(tab, "tab.yaml"); }), {"tab.yaml:3: YAML syntax error"});

  expect_contains(value_error_of([] { parse_run_config("model: {type: cnn}\n---\nmodel: {type: cnn}\n", "two.yaml"); }),
                  {"two.yaml:2:", "holds more than one YAML document"});
  expect_contains(value_error_of([] { parse_run_config("- model\n", "list.yaml"); }),
                  {"list.yaml:1: expected a mapping of blocks", "got a list"});
  expect_contains(value_error_of([] { parse_run_config("", "empty.yaml"); }),
                  {"empty.yaml: model: required key missing"});
}

TEST(RunConfigErrors, FilesThatCannotBeRead) {
  tandem::testing::TempDir dir;
  const std::string missing = dir.file("nope.yaml");
  expect_contains(value_error_of([&] { load_run_config(missing); }),
                  {missing + ": cannot open the config file: No such file or directory"});
  // A file's errors carry its path as given.
  const std::string path = dir.file("bad.yaml");
  std::ofstream(path) << kMlp << "optimizer:\n  type: adam\n  parameters:\n    lr: 0.1\n";
  expect_contains(value_error_of([&] { load_run_config(path); }), {path + ":8: optimizer.parameters.lr: unknown key"});
}

TEST(RunConfigErrors, ConfigsBuiltInCodeNameTheKey) {
  RunConfig c;
  c.source = "api";
  c.model.type = "mlp";
  expect_contains(value_error_of([&] { validate(c); }), {"api: model.parameters.layer_sizes: required key missing"});
  c.model.layer_sizes = {4, 2};
  c.optimizer.beta2 = 1.0;
  expect_contains(value_error_of([&] { validate(c); }), {"api: optimizer.parameters.beta2: must be in [0, 1), got 1"});
  c.optimizer.beta2 = 0.999;
  c.key_lines["training"] = 12;  // config_error uses the nearest line the file wrote
  c.accumulation_steps = -1;
  expect_contains(value_error_of([&] { validate(c); }), {"api:12: training.accumulation_steps: must be >= 1, got -1"});
}

TEST(RunConfigErrors, TorchFortKeysTandemDoesNotImplement) {
  // A reinforcement-learning config (TorchFort's torchfort_rl layout): refused at its first RL block.
  const std::string rl = "general:\n  report_frequency: 1\n\nalgorithm:\n  type: td3\n  parameters:\n"
                         "    batch_size: 64\n    policy_lag: 2\n\nactor:\n  type: space_noise\n\n"
                         "replay_buffer:\n  type: uniform\n  parameters: {max_size: 1024, min_size: 64}\n\n"
                         "policy_model:\n  type: mlp\n  parameters: {layer_sizes: [1, 16, 1]}\n\n"
                         "optimizer:\n  type: adam\n";
  expect_error(rl, "algorithm", "algorithm", "reinforcement learning (TorchFort's torchfort_rl) is not supported");
  expect_error(kMlp + "rollout_buffer:\n  type: gae_lambda\n", "rollout_buffer", "rollout_buffer",
               "reinforcement learning (TorchFort's torchfort_rl) is not supported");
  expect_error("actor_critic_model:\n  type: ActorCriticMLP\n", "actor_critic_model", "actor_critic_model",
               "reinforcement learning (TorchFort's torchfort_rl) is not supported");
  // TorchFort's types tandem lacks are named as such.
  expect_error(kMlp + "loss:\n  type: torchscript\n  parameters: {filename: loss.pt}\n", "torchscript", "loss.type",
               "TorchScript losses are not supported");
  expect_error(kMlp + "lr_scheduler:\n  type: linear\n  parameters: {total_iters: 10, end_factor: 0.1}\n",
               "type: linear", "lr_scheduler.type", "TorchFort's linear schedule is not supported");
}

TEST(RunConfigErrors, SequentialLayersInTorchFortLayout) {
  const std::string seq = "model:\n  type: sequential\n  parameters:\n    layers:\n";
  // Under parameters:, the errors name the argument's own path and line.
  expect_error(seq + "      - type: linear\n        parameters:\n          in_features: 2\n          out_feature: 1\n",
               "out_feature", "model.parameters.layers[0].parameters.out_feature",
               "unknown argument of linear (expected in_features, out_features, bias)");
  expect_error(seq + "      - type: linear\n        parameters:\n          in_features: 2\n", "        parameters:\n",
               "model.parameters.layers[0].parameters.out_features", "required key missing");
  expect_error(seq + "      - type: linear\n        parameters: 3\n", "parameters: 3",
               "model.parameters.layers[0].parameters", "expected a mapping");
  // One form or the other, not both.
  expect_error(seq + "      - type: linear\n        in_features: 2\n        parameters: {out_features: 1}\n",
               "in_features", "model.parameters.layers[0].in_features",
               "either beside its type or under parameters:, not both");
  // A mapping where a number goes shows both accepted forms.
  expect_error(seq + "      - type: linear\n        args: {in_features: 2, out_features: 1}\n", "args",
               "model.parameters.layers[0].args",
               "got a mapping (a layer is written {type: linear, in_features: 2, out_features: 1} or "
               "{type: linear, parameters: {in_features: 2, out_features: 1}})");
}
