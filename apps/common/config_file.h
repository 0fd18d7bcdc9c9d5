// tandem-train --config FILE: a run-config YAML file (nn/config/run_config.h) laid over the flags'
// defaults. Precedence: a flag given on the command line > the file > the flag's default; the file
// applies only the keys it writes.
#pragma once
#include "apps/common/engine.h"
#include <CLI/CLI.hpp>

#include "train/train_config.h"

namespace tandem::app {

// Loads cfg.config_path (nothing when empty) and copies into cfg every setting the file writes whose
// flag `app` did not see. Throws ValueError "<file>:<line>: <key>: ..." for a bad file, and for one
// tandem-train cannot follow: a model other than its Fashion-MNIST mlp (layer_sizes [784, 512, 512,
// 10], no dropout), cnn or gpt (bytes: vocab_size 256), or a loss other than cross_entropy with
// reduction mean. A gpt file's shape goes into cfg.gpt.
void apply_config_file(const CLI::App& app, TrainConfig& cfg);

// "gpt" when `path` is a run config of a gpt, else `otherwise` (also for a file that does not parse:
// apply_config_file reports that). The gpt's defaults are applied while parsing the flags, before
// the file's keys are laid over them, so the model must be known then.
std::string gpt_or(const std::string& path, const std::string& otherwise);

}  // namespace tandem::app
