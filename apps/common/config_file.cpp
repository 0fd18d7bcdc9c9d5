// tandem-train's settings before its flags: the model's defaults and the --config file.
#include "apps/common/config_file.h"

#include <algorithm>
#include <vector>

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
// its gpt; a file describing another model is an error, not a silent swap. With the user's arrays
// (--data) any model: check_arrays_fit (array_data.h) says whether it fits them.
std::string trainable_model(const RunConfig& rc, bool own_data) {
  const nn::config::ModelConfig& m = rc.model;
  if (own_data && m.type != "gpt") return m.type;
  if (m.type == "cnn") return "cnn";
  if (m.type == "onnx") return "onnx";  // its input must fit the data: the first forward says if not
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

bool is_onnx_file(const std::string& model) {
  return model.size() > 5 && model.compare(model.size() - 5, 5, ".onnx") == 0;
}

std::optional<std::string> flag_value(int argc, char** argv, const std::string& flag) {
  std::optional<std::string> value;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // the rest are positional
    if (arg == flag && i + 1 < argc) value = argv[++i];
    else if (arg.rfind(flag + "=", 0) == 0) value = arg.substr(flag.size() + 1);
  }
  return value;
}

void apply_settings_before_flags(TrainConfig& cfg, int argc, char** argv) {
  std::optional<std::string> model = flag_value(argc, argv, "--model");
  if (model && is_onnx_file(*model)) {  // --model FILE.onnx: the run config's model: {type: onnx, filename}
    TANDEM_CHECK(flag_value(argc, argv, "--config").value_or("").empty(),
                 "--model {} and --config: give the ONNX file in the config (model: {{type: onnx, parameters: "
                 "{{filename: ...}}}}) or on the command line, not both", *model);
    cfg.model = nn::config::ModelConfig{};
    cfg.model.type = "onnx";
    cfg.model.filename = *model;
    return;
  }
  if (model && nn::find_model_entry(*model) == nullptr) model.reset();  // the flag's check says so
  cfg.config_path = flag_value(argc, argv, "--config").value_or("");
  if (!cfg.config_path.empty()) {
    // The file alone first: what it describes must be something tandem-train trains.
    const RunConfig file = nn::config::load_run_config(cfg.config_path);
    const bool own_data = flag_value(argc, argv, "--data").has_value();
    const std::string type = trainable_model(file, own_data);
    if (model && *model != type)
      nn::config::config_error(file, "model.type",
                               fmt::format("the file's model is {} and --model says {}: give one of them", type,
                                           *model));
    if (own_data && file.loss.reduction == ops::Reduction::None)
      nn::config::config_error(file, "loss.parameters.reduction", "training needs one loss value: mean or sum");
    if (!own_data && file.sets("loss") &&
        !(file.loss.type == nn::config::LossType::CrossEntropy && file.loss.reduction == ops::Reduction::Mean))
      nn::config::config_error(file,
                               file.loss.type == nn::config::LossType::CrossEntropy ? "loss.parameters.reduction"
                                                                                     : "loss.type",
                               "tandem-train trains its classifiers with cross_entropy, reduction mean; write "
                               "loss: {type: cross_entropy} or leave the loss block out");
    model = type;
  }
  if (model) {
    cfg.model = nn::default_model_config(*model);
    cfg.apply_model_defaults(*model);
  }
  if (!cfg.config_path.empty())
    static_cast<RunConfig&>(cfg) = nn::config::load_run_config_onto(cfg, cfg.config_path);
}

}  // namespace tandem::app
