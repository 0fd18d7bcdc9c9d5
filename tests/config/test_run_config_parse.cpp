// Run-config files that load: TorchFort's mlp layout, every block, the defaults, the sequential
// layers' arguments, and the key lines that a program layering the file over its own settings reads.
#include <gtest/gtest.h>

#include <fstream>

#include "nn/config/run_config.h"
#include "tests/config/config_test_util.h"
#include "tests/data/temp_dir.h"

using namespace tandem;
using namespace tandem::nn::config;
using tandem::testing::line_in;

namespace {

// TorchFort's native-mlp example layout (its general block, MSE in capitals, amsgrad: 0), plus
// tandem's training and ddp blocks.
const std::string kTorchFortMlp = R"(general:
  enable_wandb_hook: 0
  report_frequency: 100

model:
  type: mlp
  parameters:
    dropout: 0.25
    layer_sizes: [32, 64, 64, 1]

loss:
  type: MSE
  parameters:
    reduction: sum

optimizer:
  type: adam
  parameters:
    learning_rate: 1e-3
    beta1: 0.8
    beta2: 0.99
    weight_decay: 0
    eps: 1e-6
    amsgrad: 0

lr_scheduler:
  type: cosine_annealing
  parameters:
    T_max: 100000
    eta_min: 1.0e-5

training:
  grad_clip: 2.5
  accumulation_steps: 3
  amp: BF16
  seed: 42

ddp:
  bucket_cap_mb: 4
  gradient_as_bucket_view: true
  static_graph: yes
  find_unused_parameters: false
  broadcast_buffers: off
  zero_stage: 2
)";

}  // namespace

TEST(RunConfigParse, TorchFortMlpFileLoads) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("run.yaml");
  std::ofstream(path) << kTorchFortMlp;
  RunConfig c = load_run_config(path);

  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.model.type, "mlp");
  EXPECT_EQ(c.model.layer_sizes, (std::vector<int64_t>{32, 64, 64, 1}));
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.25);
  EXPECT_TRUE(c.model.flatten_non_batch_dims);
  EXPECT_STREQ(enum_name(c.loss.type), "mse");
  EXPECT_STREQ(enum_name(c.loss.reduction), "sum");
  EXPECT_STREQ(enum_name(c.optimizer.type), "adam");
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_FALSE(c.optimizer.fused);
  EXPECT_STREQ(enum_name(c.lr_scheduler.type), "cosine_annealing");
  EXPECT_EQ(c.lr_scheduler.t_max, 100000);
  EXPECT_DOUBLE_EQ(c.lr_scheduler.eta_min, 1e-5);
  EXPECT_DOUBLE_EQ(c.grad_clip, 2.5);
  EXPECT_EQ(c.accumulation_steps, 3);
  EXPECT_STREQ(enum_name(c.amp), "bf16");
  EXPECT_EQ(c.seed, 42);
  EXPECT_DOUBLE_EQ(c.ddp.bucket_cap_mb, 4.0);
  EXPECT_TRUE(c.ddp.gradient_as_bucket_view);
  EXPECT_TRUE(c.ddp.static_graph);
  EXPECT_FALSE(c.ddp.find_unused_parameters);
  EXPECT_FALSE(c.ddp.broadcast_buffers);
  EXPECT_EQ(c.ddp.zero_stage, 2);
  EXPECT_DOUBLE_EQ(c.ddp.first_bucket_mb, 1.0);  // not in the file: DDPOptions' default

  // Every key the file wrote, at its line.
  EXPECT_EQ(c.key_lines.at("optimizer.parameters.learning_rate"), line_in(kTorchFortMlp, "learning_rate"));
  EXPECT_EQ(c.key_lines.at("model.parameters.layer_sizes"), line_in(kTorchFortMlp, "layer_sizes"));
  EXPECT_EQ(c.key_lines.at("ddp"), line_in(kTorchFortMlp, "ddp:"));
  EXPECT_TRUE(c.sets("training.seed"));
  EXPECT_FALSE(c.sets("optimizer.parameters.momentum"));
  EXPECT_EQ(c.warnings.size(), 2u);  // the general block's two keys: RunConfigParse.TorchFortGeneralKeysWarn
}

TEST(RunConfigParse, OnlyAModelTakesTheDefaults) {
  RunConfig c = parse_run_config("model: {type: cnn}\n", "mini.yaml");
  EXPECT_EQ(c.source, "mini.yaml");
  EXPECT_EQ(c.model.type, "cnn");
  EXPECT_STREQ(enum_name(c.loss.type), "mse");
  EXPECT_STREQ(enum_name(c.loss.reduction), "mean");
  EXPECT_STREQ(enum_name(c.optimizer.type), "adam");
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 1e-3);
  EXPECT_STREQ(enum_name(c.lr_scheduler.type), "constant");
  EXPECT_DOUBLE_EQ(c.grad_clip, 0.0);
  EXPECT_EQ(c.accumulation_steps, 1);
  EXPECT_STREQ(enum_name(c.amp), "off");
  EXPECT_DOUBLE_EQ(c.ddp.bucket_cap_mb, 25.0);
  EXPECT_TRUE(c.ddp.broadcast_buffers);
  EXPECT_TRUE(c.sets("model.type"));
  EXPECT_FALSE(c.sets("loss"));
  EXPECT_FALSE(c.sets("optimizer"));
}

TEST(RunConfigParse, SgdAdamwAndSchedules) {
  RunConfig sgd = parse_run_config(R"(model: {type: mlp, parameters: {layer_sizes: [4, 2]}}
optimizer:
  type: SGD
  parameters: {learning_rate: 0.5, momentum: 0.9, dampening: 0, weight_decay: 1e-4, nesterov: true, fused: true}
lr_scheduler: {type: step, parameters: {step_size: 7, gamma: 0.5}}
)");
  EXPECT_STREQ(enum_name(sgd.optimizer.type), "sgd");
  EXPECT_DOUBLE_EQ(sgd.optimizer.learning_rate, 0.5);
  EXPECT_DOUBLE_EQ(sgd.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(sgd.optimizer.weight_decay, 1e-4);
  EXPECT_TRUE(sgd.optimizer.nesterov);
  EXPECT_TRUE(sgd.optimizer.fused);
  EXPECT_STREQ(enum_name(sgd.lr_scheduler.type), "step");
  EXPECT_EQ(sgd.lr_scheduler.step_size, 7);
  EXPECT_DOUBLE_EQ(sgd.lr_scheduler.gamma, 0.5);

  // AdamW without weight_decay takes torch's default 1e-2; written, the file's value stands.
  RunConfig adamw = parse_run_config("model: {type: cnn}\noptimizer: {type: adamw}\n"
                                     "lr_scheduler: {type: linear_warmup, parameters: {warmup_steps: 5, "
                                     "start_factor: 0.1, T_max: 20.0, eta_min: 0.001}}\n");
  EXPECT_DOUBLE_EQ(adamw.optimizer.weight_decay, 1e-2);
  EXPECT_STREQ(enum_name(adamw.lr_scheduler.type), "linear_warmup");
  EXPECT_EQ(adamw.lr_scheduler.warmup_steps, 5);
  EXPECT_DOUBLE_EQ(adamw.lr_scheduler.start_factor, 0.1);
  EXPECT_EQ(adamw.lr_scheduler.t_max, 20);  // TorchFort writes T_max as a float
  EXPECT_DOUBLE_EQ(adamw.lr_scheduler.eta_min, 0.001);
  RunConfig no_decay =
      parse_run_config("model: {type: cnn}\noptimizer: {type: adamw, parameters: {weight_decay: 0}}\n");
  EXPECT_DOUBLE_EQ(no_decay.optimizer.weight_decay, 0.0);
}

TEST(RunConfigParse, TorchFortOptimizerGeneralIsTheTrainingBlock) {
  const std::string text = "model: {type: cnn}\noptimizer:\n  type: adam\n  general:\n"
                           "    grad_accumulation_steps: 4\n    max_grad_norm: 1.5\n";
  RunConfig c = parse_run_config(text, "tf.yaml");
  EXPECT_EQ(c.accumulation_steps, 4);
  EXPECT_DOUBLE_EQ(c.grad_clip, 1.5);
  EXPECT_TRUE(c.sets("training.grad_clip"));
  EXPECT_EQ(c.key_lines.at("training.accumulation_steps"), line_in(text, "grad_accumulation_steps"));
}

TEST(RunConfigParse, SequentialLayersKeepTheirArguments) {
  const std::string text = R"(model:
  type: sequential
  parameters:
    layers:
      - {type: Conv2d, in_channels: 1, out_channels: 4, kernel_size: [3, 3], padding: 1, bias: false}
      - type: BatchNorm2d
        num_features: 4
      - {type: relu}
      - {type: gelu, approximate: tanh}
      - {type: layernorm, normalized_shape: [4, 8]}
)";
  RunConfig c = parse_run_config(text, "seq.yaml");
  ASSERT_EQ(c.model.layers.size(), 5u);
  const LayerConfig& conv = c.model.layers[0];
  EXPECT_EQ(conv.type, "conv2d");
  EXPECT_EQ(conv.line, line_in(text, "Conv2d"));
  ASSERT_EQ(conv.args.size(), 5u);  // in file order
  EXPECT_EQ(conv.args[0].first, "in_channels");
  EXPECT_EQ(conv.args[2], (std::pair<std::string, std::vector<double>>{"kernel_size", {3, 3}}));
  EXPECT_EQ(conv.args[4], (std::pair<std::string, std::vector<double>>{"bias", {0}}));
  EXPECT_EQ(c.model.layers[1].type, "batchnorm2d");
  EXPECT_EQ(c.model.layers[1].line, line_in(text, "BatchNorm2d"));
  EXPECT_TRUE(c.model.layers[2].args.empty());
  EXPECT_EQ(c.model.layers[3].args[0], (std::pair<std::string, std::vector<double>>{"approximate", {1}}));
  EXPECT_EQ(c.model.layers[4].args[0].second, (std::vector<double>{4, 8}));
  EXPECT_EQ(c.key_lines.at("model.parameters.layers[1].num_features"), line_in(text, "num_features"));
}

TEST(RunConfigParse, SequentialLayersInTorchFortLayout) {
  // TorchFort writes a block's settings under parameters:; a layer may too, and reads as the short form.
  const std::string text = R"(model:
  type: sequential
  parameters:
    layers:
      - type: linear
        parameters:
          in_features: 4
          out_features: 3
          bias: 0
      - type: relu
        parameters:
      - {type: Dropout, parameters: {p: 0.25}}
      - {type: linear, in_features: 3, out_features: 1}
)";
  RunConfig c = parse_run_config(text, "tf.yaml");
  ASSERT_EQ(c.model.layers.size(), 4u);
  EXPECT_EQ(c.model.layers[0].type, "linear");
  EXPECT_EQ(c.model.layers[0].args, (std::vector<std::pair<std::string, std::vector<double>>>{
                                        {"in_features", {4}}, {"out_features", {3}}, {"bias", {0}}}));
  EXPECT_EQ(c.model.layers[0].line, line_in(text, "type: linear"));
  EXPECT_TRUE(c.model.layers[1].args.empty());
  EXPECT_EQ(c.model.layers[2].args, (std::vector<std::pair<std::string, std::vector<double>>>{{"p", {0.25}}}));
  EXPECT_EQ(c.key_lines.at("model.parameters.layers[0].parameters.out_features"), line_in(text, "out_features"));
  Generator gen(0);
  auto model = build_model(c.model, gen);
  EXPECT_EQ(model->named_parameters().size(), 3u);  // 0.weight (no bias), 3.weight, 3.bias
}

TEST(RunConfigParse, TorchFortGeneralKeysWarn) {
  // TorchFort's general keys load (its files stay loadable) but are never silently accepted: each one
  // set is a warning that names it and says tandem ignores it.
  const std::string text = "general:\n  report_frequency: 10\n  verbose: 1\n  enable_wandb_hook: 0\n"
                           "  enable_cuda_graphs: 1\nmodel: {type: cnn}\n";
  ::testing::internal::CaptureStderr();
  RunConfig c = parse_run_config(text, "general-warns.yaml");
  parse_run_config(text, "general-warns.yaml");  // a second load of the same file prints nothing new
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(c.warnings.size(), 4u);
  const char* keys[] = {"report_frequency", "verbose", "enable_wandb_hook", "enable_cuda_graphs"};
  for (size_t i = 0; i < 4; ++i) {
    const std::string head = "general-warns.yaml:" + std::to_string(line_in(text, keys[i])) + ": general." +
                             keys[i] + ": TorchFort's key, ignored: tandem does not act on it (";
    EXPECT_EQ(c.warnings[i].rfind(head, 0), 0u) << c.warnings[i];
    const std::string line = "tandem: warning: " + c.warnings[i] + "\n";
    EXPECT_NE(err.find(line), std::string::npos) << err;
    EXPECT_EQ(err.find(line), err.rfind(line)) << "printed twice: " << err;
  }
  EXPECT_NE(c.warnings[3].find("does not capture CUDA graphs"), std::string::npos);
  // Still type-checked; and a file without a general block has no warnings.
  EXPECT_THROW(parse_run_config("general: {enable_cuda_graphs: maybe}\nmodel: {type: cnn}\n"), ValueError);
  EXPECT_TRUE(parse_run_config("model: {type: cnn}\n").warnings.empty());
}
