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
#include "runtime/enum_names.h"
#include "runtime/random.h"
#include "runtime/reduction.h"
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
  // onnx: the model file (a relative path is taken from the config file's folder), and the
  // initializers that are not trained (names, or prefixes ending in ".").
  std::string filename;
  std::vector<std::string> frozen;
  // Any other registered type: its numbers (ModelEntry::parameters) by name, as the file or the
  // program set them; value() gives the default of one not set.
  std::map<std::string, double> values;
  double value(const std::string& name) const;
};

// The closed sets of words a run config holds as enums (runtime/enum_names.h gives their words: the
// YAML file, the flags and the logs spell them so).
enum class LossType { MSE, L1, CrossEntropy, BceWithLogits };  // mse, l1, cross_entropy, bce_with_logits
enum class OptimizerType { SGD, Adam, AdamW };                                // sgd, adam, adamw
enum class ScheduleType { Constant, Step, Cosine, CosineAnnealing, LinearWarmup };
enum class Amp { Off, F16, BF16 };                                            // off, f16, bf16

struct LossConfig {
  LossType type = LossType::MSE;  // the file's type is read in any case (TorchFort writes MSE, L1)
  ops::Reduction reduction = ops::Reduction::Mean;
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Adam;
  double learning_rate = 1e-3;
  // sgd (weight_decay: all; a file naming adamw without weight_decay gets torch's 1e-2)
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  bool fused = false;                             // the multi-tensor fused variants
};

// The learning rate per optimizer step.
//   constant: the optimizer's lr;  step: x gamma every step_size steps;
//   cosine: down to 0 at the run's last step (the run's length is the trainer's: a program without
//     one, the C API, gives cosine_annealing and T_max instead);
//   cosine_annealing: down to eta_min over t_max steps;
//   linear_warmup: from start_factor x lr to lr over warmup_steps, then constant, or a cosine over
//     t_max steps when t_max > 0.
// warmup_steps > 0 with constant, step or cosine puts a linear warmup in front, lr x (s + 1) / (N + 1)
// at step s < N (the first step already moves), and the schedule starts at step N from its step 0.
struct ScheduleConfig {
  ScheduleType type = ScheduleType::Constant;
  int64_t step_size = 0;     // step
  double gamma = 0.1;        // step
  int64_t t_max = 0;         // cosine_annealing, linear_warmup (T_max)
  double eta_min = 0.0;      // cosine_annealing, linear_warmup
  int64_t warmup_steps = 0;  // linear_warmup; constant, step, cosine: the warmup in front
  double start_factor = 1.0 / 3.0;  // linear_warmup
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
  Amp amp = Amp::Off;
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

// Parse a YAML file / text onto `base`, the settings in force before it (a program's defaults, the
// C API's: RunConfig{}): the file sets what it writes and leaves the rest. A model or lr_scheduler
// block whose type differs from the base's starts from that type's defaults (the base's layers or
// T_max do not leak into another type); optimizer, training and ddp keys apply one by one. So
// tandem-train lays a file over its defaults, and its flags over both, with no merge code.
RunConfig parse_run_config_onto(RunConfig base, const std::string& yaml_text, const std::string& source);
RunConfig load_run_config_onto(RunConfig base, const std::string& path);
// Parse a YAML file / text. Throws ValueError "<file>:<line>: <key>: <what>" for unknown keys, wrong
// types, missing required keys (model.type's own: layer_sizes for mlp, layers for sequential), values
// out of range, TorchFort's blocks and types tandem does not implement (a reinforcement-learning
// config's algorithm, actor, replay_buffer, ...; torchscript models and losses; the multistep,
// polynomial and linear schedules); and IOError-like ValueError "<file>: cannot open" for a file that
// does not exist. TorchFort's general block is read and ignored: each key it sets is a warning
// (RunConfig::warnings, and "tandem: warning: ..." on stderr, once per process for each message).
// Types and words are read in any case (TorchFort writes MSE); model and layer types are stored
// lower-case, the others as enums.
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
// The schedule of `schedule` (ScheduleConfig's comment), nullptr for a constant lr without warmup.
// total_steps: the run's length, which cosine needs (0: unknown, and cosine is a ValueError).
std::unique_ptr<LRScheduler> build_scheduler(const ScheduleConfig& schedule, Optimizer& optimizer,
                                             int64_t total_steps = 0);
// The loss of `output` against `target` (cross_entropy: logits [N, C] and class indices [N], or a
// sequence model's logits [N, T, C] and indices [N, T], every position a sample; mse/l1: target of
// output's shape), reduced as configured, as a differentiable scalar (reduction none: [N] or [N * T]
// for cross_entropy, the output's shape for mse and l1). l1 is relu(d) + relu(-d): its gradient at d = 0 is 0.
Tensor compute_loss(const LossConfig& loss, const Tensor& output, const Tensor& target);

}  // namespace tandem::nn::config

namespace tandem {
template <>
struct EnumNames<nn::config::LossType> {
  static constexpr std::pair<nn::config::LossType, const char*> words[] = {
      {nn::config::LossType::MSE, "mse"}, {nn::config::LossType::L1, "l1"},
      {nn::config::LossType::CrossEntropy, "cross_entropy"},
      {nn::config::LossType::BceWithLogits, "bce_with_logits"}};
};
template <>
struct EnumNames<ops::Reduction> {
  static constexpr std::pair<ops::Reduction, const char*> words[] = {
      {ops::Reduction::Mean, "mean"}, {ops::Reduction::Sum, "sum"}, {ops::Reduction::None, "none"}};
};
template <>
struct EnumNames<nn::config::OptimizerType> {
  static constexpr std::pair<nn::config::OptimizerType, const char*> words[] = {
      {nn::config::OptimizerType::SGD, "sgd"}, {nn::config::OptimizerType::Adam, "adam"},
      {nn::config::OptimizerType::AdamW, "adamw"}};
};
template <>
struct EnumNames<nn::config::ScheduleType> {
  static constexpr std::pair<nn::config::ScheduleType, const char*> words[] = {
      {nn::config::ScheduleType::Constant, "constant"},
      {nn::config::ScheduleType::Step, "step"},
      {nn::config::ScheduleType::Cosine, "cosine"},
      {nn::config::ScheduleType::CosineAnnealing, "cosine_annealing"},
      {nn::config::ScheduleType::LinearWarmup, "linear_warmup"}};
};
template <>
struct EnumNames<nn::config::Amp> {
  static constexpr std::pair<nn::config::Amp, const char*> words[] = {
      {nn::config::Amp::Off, "off"}, {nn::config::Amp::F16, "f16"}, {nn::config::Amp::BF16, "bf16"}};
};
}  // namespace tandem
