// tandem-train's gpt flags (shape, text, validation, sample) and their checks. The gpt's defaults
// (batch 8, adamw ...) are TrainConfig::apply_model_defaults, applied before a file and the flags.
#pragma once
#include "apps/common/engine.h"
#include <CLI/CLI.hpp>

#include "train/train_config.h"

namespace tandem::app {

// Registers --n-layer, --n-head, --n-embd, --context, --text-dir, --eval-every, --eval-windows,
// --sample-tokens, --temperature, --top-k, --prompt, --init-from and --tokenizer.
void add_gpt_flags(CLI::App& app, TrainConfig& cfg);

// Rejects gpt flags given with another model and shapes that cannot work (a CLI::ValidationError).
void check_gpt_flags(const CLI::App& app, const TrainConfig& cfg);

}  // namespace tandem::app
