// tandem-train's gpt flags (shape, text, validation, sample, warmup) and the gpt defaults that
// replace the Fashion-MNIST ones where the command line did not set them.
#pragma once
#include "apps/common/engine.h"
#include <CLI/CLI.hpp>

#include "train/train_config.h"

namespace tandem::app {

// Registers --n-layer, --n-head, --n-embd, --context, --text-dir, --eval-every, --eval-windows,
// --sample-tokens, --temperature, --top-k, --prompt, --init-from, --tokenizer and --warmup-steps.
void add_gpt_flags(CLI::App& app, TrainConfig& cfg);

// With --model gpt, for every flag not given: batch 8, adamw at lr 1e-3 with weight decay 0.1 (on
// matrices and embeddings, as nanoGPT), 50 warmup steps, gradient clipping at 1.0, evaluation
// batches of 32 windows. Rejects gpt flags given with another model and shapes that cannot work.
void apply_gpt_defaults(const CLI::App& app, TrainConfig& cfg);

}  // namespace tandem::app
