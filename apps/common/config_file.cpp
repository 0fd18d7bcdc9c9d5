// --config: a run-config file's settings under the command line's flags.
#include "apps/common/config_file.h"

#include <algorithm>

#include <fmt/format.h>

#include "nn/model_registry.h"
#include "runtime/error.h"
#include "runtime/spelling.h"

namespace tandem::app {

namespace {

using nn::config::RunConfig;

// The registered Fashion-MNIST models but the mlp (whose shape tandem-train fixes).
std::vector<std::string> other_fashion_mnist_types() {
  std::vector<std::string> types = nn::model_types("fashion-mnist");
  types.erase(std::remove(types.begin(), types.end(), "mlp"), types.end());
  return types;
}

// tandem-train's data is Fashion-MNIST (784 pixels, 10 classes) for its own two models, or text for
// its gpt; a file describing another model is an error, not a silent swap.
std::string trainable_model(const RunConfig& rc) {
  const nn::config::ModelConfig& m = rc.model;
  if (m.type == "cnn") return "cnn";
  if (m.type == "gpt") {
    if (m.gpt.vocab_size != 256)
      nn::config::config_error(rc, "model.parameters.vocab_size",
                               fmt::format("tandem-train's gpt reads bytes (vocab_size 256) or takes its vocabulary "
                                           "from --tokenizer; this file has {}", m.gpt.vocab_size));
    return "gpt";
  }
  if (m.type == "mlp" && m.layer_sizes == std::vector<int64_t>{784, 512, 512, 10} && m.dropout == 0.0) return "mlp";
  if (m.type != "mlp" && nn::model_entry(m.type).dataset == "fashion-mnist") return m.type;  // its own parameters
  const std::string what =
      m.type == "mlp" ? fmt::format("an mlp with layer_sizes [{}]{}", fmt::join(m.layer_sizes, ", "),
                                    m.dropout > 0.0 ? fmt::format(" and dropout {}", m.dropout) : std::string())
                      : fmt::format("a sequential model of {} layers", m.layers.size());
  nn::config::config_error(rc, "model",
                           fmt::format("tandem-train trains only its Fashion-MNIST models (type mlp with layer_sizes "
                                       "[784, 512, 512, 10] and no dropout, or type {}) and type gpt; this file has "
                                       "{}. Train other models through the library (nn::config::build_model), or "
                                       "give --model",
                                       or_list(other_fashion_mnist_types()), what));
}

}  // namespace

std::string gpt_or(const std::string& path, const std::string& otherwise) {
  try {
    return nn::config::load_run_config(path).model.type == "gpt" ? "gpt" : otherwise;
  } catch (const Error&) {
    return otherwise;
  }
}

void apply_config_file(const CLI::App& app, TrainConfig& cfg) {
  if (cfg.config_path.empty()) return;
  const RunConfig rc = nn::config::load_run_config(cfg.config_path);
  // The file's value for `key`, unless the command line gave `flag` (nullptr: no flag sets it).
  auto from_file = [&](const char* key, const char* flag = nullptr) {
    return rc.sets(key) && (flag == nullptr || app.count(flag) == 0);
  };

  if (app.count("--model") == 0) cfg.model = trainable_model(rc);
  // A model with parameters of its own (resmlp, ...): the file's, where the file names that model.
  if (rc.model.type == cfg.model && !nn::model_entry(cfg.model).parameters.empty()) cfg.model_config = rc.model;
  if (rc.model.type == "gpt" && cfg.model == "gpt") {  // the file's shape under the command line's flags
    if (from_file("model.parameters.n_layer", "--n-layer")) cfg.gpt.n_layer = rc.model.gpt.n_layer;
    if (from_file("model.parameters.n_head", "--n-head")) cfg.gpt.n_head = rc.model.gpt.n_head;
    if (from_file("model.parameters.n_embd", "--n-embd")) cfg.gpt.n_embd = rc.model.gpt.n_embd;
    if (from_file("model.parameters.context", "--context")) cfg.gpt.context = rc.model.gpt.context;
  }
  if (rc.sets("loss") && !(rc.loss.type == "cross_entropy" && rc.loss.reduction == "mean"))
    nn::config::config_error(rc, rc.loss.type == "cross_entropy" ? "loss.parameters.reduction" : "loss.type",
                             "tandem-train trains its classifiers with cross_entropy, reduction mean; write "
                             "loss: {type: cross_entropy} or leave the loss block out");

  const nn::config::OptimizerConfig& o = rc.optimizer;
  nn::config::OptimizerConfig& mine = cfg.optimizer;
  if (from_file("optimizer.type", "--optimizer")) mine.type = o.type;
  if (from_file("optimizer.parameters.learning_rate", "--lr")) mine.learning_rate = o.learning_rate;
  if (from_file("optimizer.parameters.momentum", "--momentum")) mine.momentum = o.momentum;
  if (from_file("optimizer.parameters.weight_decay", "--weight-decay")) mine.weight_decay = o.weight_decay;
  if (from_file("optimizer.parameters.dampening")) mine.dampening = o.dampening;
  if (from_file("optimizer.parameters.nesterov")) mine.nesterov = o.nesterov;
  if (from_file("optimizer.parameters.beta1")) mine.beta1 = o.beta1;
  if (from_file("optimizer.parameters.beta2")) mine.beta2 = o.beta2;
  if (from_file("optimizer.parameters.eps")) mine.eps = o.eps;
  if (from_file("optimizer.parameters.fused")) mine.fused = o.fused;

  if (from_file("lr_scheduler", "--lr-schedule")) {
    cfg.lr_schedule = rc.lr_scheduler.type;
    if (rc.lr_scheduler.type == "constant")
      cfg.lr_scheduler.reset();
    else
      cfg.lr_scheduler = rc.lr_scheduler;
  }

  if (from_file("training.grad_clip", "--grad-clip")) cfg.grad_clip = rc.grad_clip;
  if (from_file("training.accumulation_steps", "--accumulation-steps")) cfg.accumulation_steps = rc.accumulation_steps;
  if (from_file("training.amp", "--amp")) cfg.amp = rc.amp;
  if (from_file("training.seed", "--seed")) cfg.seed = static_cast<uint64_t>(rc.seed);

  if (from_file("ddp.bucket_cap_mb", "--bucket-cap-mb")) cfg.ddp.bucket_cap_mb = rc.ddp.bucket_cap_mb;
  if (from_file("ddp.first_bucket_mb")) cfg.ddp.first_bucket_mb = rc.ddp.first_bucket_mb;
  if (from_file("ddp.gradient_as_bucket_view")) cfg.ddp.gradient_as_bucket_view = rc.ddp.gradient_as_bucket_view;
  if (from_file("ddp.static_graph")) cfg.ddp.static_graph = rc.ddp.static_graph;
  if (from_file("ddp.find_unused_parameters")) cfg.ddp.find_unused_parameters = rc.ddp.find_unused_parameters;
  if (from_file("ddp.broadcast_buffers")) cfg.ddp.broadcast_buffers = rc.ddp.broadcast_buffers;
}

}  // namespace tandem::app
