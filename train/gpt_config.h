// The gpt model's settings of tandem-train (--model gpt): its shape, the text it reads, validation
// and the closing text sample. Part of TrainConfig (train_config.h); flags in gpt_cli.h.
#pragma once
#include <cstdint>
#include <string>


namespace tandem::train {

struct GptRunConfig {
  // The shape is the run config's model.gpt (TrainConfig::model); defaults: the "small" GPT of nn/gpt.h.
  // data: byte-level text, the last val_fraction of it for validation (default: Debian's fortunes)
  std::string text_dir;
  // A folder with GPT-2's vocab.json and merges.txt (or tokenizer.json): the text as BPE tokens
  // instead of bytes, the vocabulary the tokenizer's padded to a multiple of 64, val_loss in nats
  // per token.
  std::string tokenizer;
  double val_fraction = 0.1;
  // validation: every eval_every steps (0: only at epoch ends) over eval_windows evenly spaced windows
  // of the validation bytes (0: all non-overlapping windows)
  int64_t eval_every = 100;
  int64_t eval_windows = 256;
  // the sample printed by rank 0 at the end
  int64_t sample_tokens = 256;
  double temperature = 0.8;
  int64_t top_k = 40;  // 0: the whole vocabulary
  std::string prompt = "\n";
  // Start from GPT-2 weights in Hugging Face's safetensors layout (shape from the file, n_head from
  // --n-head); the vocabulary is padded to a multiple of 64 of at least 256 (byte tokens); with
  // --tokenizer the file's vocabulary must be the tokenizer's (padded or not).
  std::string init_from;
};

}  // namespace tandem::train
