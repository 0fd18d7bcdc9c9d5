// A training run described by a YAML file: the model, the loss, the optimizer and its LR schedule,
// clipping, accumulation, amp and the DDP options. One format for tandem-train --config and for the C
// and Fortran API (tandem_model_create). The layout follows NVIDIA TorchFort's supervised-learning
// config (model / loss / optimizer / lr_scheduler blocks, each `type:` + `parameters:`), so a
// TorchFort file for an mlp loads as it is; tandem adds model types (sequential, cnn) and blocks
// (training, ddp). Errors name the file, the line and the key.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/module.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"
#include "nn/parallel/ddp_options.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace tandem::nn::config {

// One layer of a `sequential` model: its type and its arguments as written (numbers and lists of
// numbers); build_model checks them against the layer's signature.
struct LayerConfig {
  std::string type;  // linear, conv2d, relu, gelu, dropout, batchnorm1d, batchnorm2d, layernorm, maxpool2d,
                     // avgpool2d, flatten, embedding, identity (nn/config/layer_specs.h: their arguments)
  std::vector<std::pair<std::string, std::vector<double>>> args;  // in file order; scalars are lists of one
  int line = 0;                                                    // where it was written, for errors
};

struct ModelConfig {
  std::string type = "mlp";          // a registered type (nn/model_registry.h): mlp, cnn, sequential, gpt, ...
  std::vector<int64_t> layer_sizes;  // mlp: [in, hidden..., out] (linear layers, ReLU between)
  double dropout = 0.0;              // mlp: dropout after each hidden activation
  std::vector<LayerConfig> layers;   // sequential
  bool flatten_non_batch_dims = true;  // mlp (TorchFort's option): inputs [N, ...] are flattened to [N, -1]
  // gpt (nn::GPT, GPT-2's blocks): input token ids [N, T], output logits [N, T, vocab_size]; the file
  // sets n_layer, n_head, n_embd, context and vocab_size (GPTConfig's defaults: tandem-train's shape).
  GPTConfig gpt;
  // Any other registered type: its numbers (ModelEntry::parameters) by name, as the file or the
  // program set them; value() gives the default of one not set.
  std::map<std::string, double> values;
  double value(const std::string& name) const;
};

struct LossConfig {
  std::string type = "mse";  // mse | l1 | cross_entropy (TorchFort's MSE / L1 accepted)
  std::string reduction = "mean";
};

struct OptimizerConfig {
  std::string type = "adam";  // sgd | adam | adamw
  double learning_rate = 1e-3;
  // sgd (weight_decay: all; a file naming adamw without weight_decay gets torch's 1e-2)
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  bool fused = false;                             // the multi-tensor fused variants
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | cosine_annealing | linear_warmup
  int64_t step_size = 0;          // step
  double gamma = 0.1;             // step
  int64_t t_max = 0;              // cosine_annealing (T_max)
  double eta_min = 0.0;           // cosine_annealing
  int64_t warmup_steps = 0;       // linear_warmup (then constant, or cosine over t_max when t_max > 0)
  double start_factor = 1.0 / 3.0;
};

struct RunConfig {
  std::string source = "<string>";  // the file it came from, for messages
  ModelConfig model;
  LossConfig loss;
  OptimizerConfig optimizer;
  ScheduleConfig lr_scheduler;
  // training block
  double grad_clip = 0.0;  // max global gradient norm; 0: off
  int64_t accumulation_steps = 1;
  std::string amp = "off";  // off | f16 | bf16
  int64_t seed = 0;
  parallel::DDPOptions ddp;  // ddp block: bucket_cap_mb, gradient_as_bucket_view, static_graph,
                             // find_unused_parameters, broadcast_buffers (and first_bucket_mb)

  // Every key the file set, by dotted path ("optimizer.parameters.learning_rate", list items as
  // "model.parameters.layers[2]"), with its 1-based line: so that a program layering the file over
  // its own defaults (tandem-train) applies only what the file says, and points at the line.
  // TorchFort's optimizer.general.{grad_accumulation_steps, max_grad_norm} are recorded under both
  // their own paths and training.{accumulation_steps, grad_clip}.
  std::map<std::string, int> key_lines;
  bool sets(const std::string& key_path) const { return key_lines.count(key_path) > 0; }

  // Keys the file set that tandem reads and then ignores (TorchFort's general block), one message each,
  // "<source>:<line>: <key_path>: ...". parse_run_config also writes each to stderr, once per process.
  std::vector<std::string> warnings;
};

// Throws ValueError "<source>:<line>: <key_path>: <what>", the line being where the file set
// key_path or, failing that, its nearest enclosing key ("<source>: <key_path>: <what>" when none).
// The message does not carry tandem's own source location: what to change is in the YAML file.
[[noreturn]] void config_error(const RunConfig& config, const std::string& key_path, const std::string& what);

// Checks every value of a config built in code or parsed (parse_run_config calls it): types and
// names known, values in range, mlp sizes >= 1, each sequential layer against its signature. Throws
// through config_error, naming the key path.
void validate(const RunConfig& config);

// Parse a YAML file / text. Throws ValueError "<file>:<line>: <key>: <what>" for unknown keys, wrong
// types, missing required keys (model.type's own: layer_sizes for mlp, layers for sequential), values
// out of range, TorchFort's blocks and types tandem does not implement (a reinforcement-learning
// config's algorithm, actor, replay_buffer, ...; torchscript models and losses; the multistep,
// polynomial and linear schedules); and IOError-like ValueError "<file>: cannot open" for a file that
// does not exist. TorchFort's general block is read and ignored: each key it sets is a warning
// (RunConfig::warnings, and "tandem: warning: ..." on stderr, once per process for each message).
// Types (model, loss, optimizer, schedule, layer) and words (reduction, amp) are stored lower-case;
// the builders accept any case for configs built in code.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source = "<string>");

// Builders from a parsed config; each checks its part of the config first (errors name the key path).
// The model is initialised from gen (PyTorch's default inits), which is not kept: Dropout layers draw
// their masks from default_generator() (a Dropout keeps a pointer to its generator, and `gen` is
// often a local). mlp: Linear-ReLU-[Dropout]...-Linear, named "0", "1", ... as nn::make_mlp; cnn:
// nn::make_cnn; sequential: the layers in order; gpt: nn::GPT of the config's shape (GPT-2's
// initialisation). cnn and sequential models fuse BatchNorm-ReLU-MaxPool2d runs
// (Sequential::fuse_batchnorm_epilogues: same names and results, faster on the CPU).
std::shared_ptr<Module> build_model(const ModelConfig& model, Generator& gen);
// Which parameters the optimizer's weight decay applies to: all of them (one group, PyTorch's
// default), or those of >= 2 dimensions (weight matrices and embeddings, not biases or LayerNorms:
// two groups, as GPT training does; what build_model's gpt is given by the C API and tandem-train).
enum class DecayOn { All, Matrices };
std::unique_ptr<Optimizer> build_optimizer(const OptimizerConfig& optimizer, const std::vector<Tensor>& params,
                                           DecayOn decay_on = DecayOn::All);
// The Adam/AdamW hyperparameters of `optimizer` (lr, betas, eps, weight decay), for a caller that builds
// its own parameter groups.
AdamOptions adam_options(const OptimizerConfig& optimizer);
// nullptr for constant.
std::unique_ptr<LRScheduler> build_scheduler(const ScheduleConfig& schedule, Optimizer& optimizer);
// The loss of `output` against `target` (cross_entropy: logits [N, C] and class indices [N], or a
// sequence model's logits [N, T, C] and indices [N, T], every position a sample; mse/l1: target of
// output's shape), reduced as configured, as a differentiable scalar (reduction none: [N] or [N * T]
// for cross_entropy, the output's shape for mse and l1). l1 is relu(d) + relu(-d): its gradient at d = 0 is 0.
Tensor compute_loss(const LossConfig& loss, const Tensor& output, const Tensor& target);

}  // namespace tandem::nn::config
