// tandem-train's settings before its flags: its defaults, the chosen model's, and a --config
// run-config YAML file (nn/config/run_config.h) read onto them. The flags are then parsed into the
// same TrainConfig, so precedence falls out of the order: a flag given on the command line > the
// file > the model's defaults > tandem-train's; the file applies only the keys it writes.
#pragma once
#include <optional>
#include <string>

#include "apps/common/engine.h"
#include "train/train_config.h"

namespace tandem::app {

// A --model that names an ONNX file rather than a registered type.
bool is_onnx_file(const std::string& model);

// The value of `flag` in argv ("--config FILE" or "--config=FILE"; the last one given), if any.
std::optional<std::string> flag_value(int argc, char** argv, const std::string& flag);

// Chooses the model (--model, else the --config file's, else mlp) and applies its defaults
// (TrainConfig::apply_model_defaults), then reads the --config file onto cfg. Throws ValueError
// "<file>:<line>: <key>: ..." for a bad file and for one tandem-train cannot follow: a model other
// than its Fashion-MNIST mlp (layer_sizes [784, 512, 512, 10], no dropout), cnn, another registered
// Fashion-MNIST model, or gpt (bytes: vocab_size 256); a model other than --model's; a loss other
// than cross_entropy with reduction mean. A --model that is not a choice is left to the flag's check.
void apply_settings_before_flags(TrainConfig& cfg, int argc, char** argv);

}  // namespace tandem::app
