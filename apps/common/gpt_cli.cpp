// The gpt flags of tandem-train.
#include "apps/common/gpt_cli.h"

#include "apps/common/cli_checks.h"

namespace tandem::app {

namespace {

// Flags that only mean something for --model gpt.
const char* const kGptOnly[] = {"--n-layer",    "--n-head",       "--n-embd",        "--context",
                                "--text-dir",   "--eval-every",   "--eval-windows",  "--sample-tokens",
                                "--temperature", "--top-k",       "--prompt",        "--init-from",
                                "--tokenizer"};

bool given(const CLI::App& app, const char* flag) { return app.count(flag) > 0; }

}  // namespace

void add_gpt_flags(CLI::App& app, TrainConfig& cfg) {
  GptRunConfig& g = cfg.gpt;
  nn::GPTConfig& shape = cfg.model.gpt;  // the run config's model block, which a --config file may set
  app.add_option("--n-layer", shape.n_layer, "gpt: transformer blocks")->check(kPositive)->capture_default_str();
  app.add_option("--n-head", shape.n_head, "gpt: attention heads (must divide --n-embd)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--n-embd", shape.n_embd, "gpt: width")->check(kPositive)->capture_default_str();
  app.add_option("--context", shape.context, "gpt: tokens per sequence")->check(kPositive)->capture_default_str();
  app.add_option("--text-dir", g.text_dir, "gpt: folder of text files (byte tokens, or BPE with --tokenizer)")->capture_default_str();
  app.add_option("--eval-every", g.eval_every, "gpt: steps between validation losses (0: only at epoch ends)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--eval-windows", g.eval_windows,
                 "gpt: validation windows, evenly spaced over the validation bytes (0: all of them)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--sample-tokens", g.sample_tokens, "gpt: tokens of text sampled at the end (0: none)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--temperature", g.temperature, "gpt: sampling temperature")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--top-k", g.top_k, "gpt: sample from the k most likely tokens (0: all)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--prompt", g.prompt, "gpt: text the sample continues");
  app.add_option("--init-from", g.init_from,
                 "gpt: start from GPT-2 weights in Hugging Face's safetensors layout (layers, width and context "
                 "from the file; --n-head must be its head count; tokens are bytes unless --tokenizer)")
      ->check(CLI::ExistingFile);
  app.add_option("--tokenizer", g.tokenizer,
                 "gpt: folder with GPT-2's vocab.json and merges.txt (or tokenizer.json): byte-level BPE "
                 "tokens instead of bytes")
      ->check(CLI::ExistingDirectory);
}

void check_gpt_flags(const CLI::App& app, const TrainConfig& cfg) {
  if (cfg.model.type != "gpt") {
    for (const char* flag : kGptOnly)
      if (given(app, flag)) throw CLI::ValidationError(flag, "only applies to --model gpt");
    return;
  }
  if (!cfg.gpt.init_from.empty())
    for (const char* flag : {"--n-layer", "--n-embd", "--context"})
      if (given(app, flag)) throw CLI::ValidationError(flag, "--init-from takes the shape from its file");
  const nn::GPTConfig& shape = cfg.model.gpt;
  if (cfg.gpt.init_from.empty() && shape.n_embd % shape.n_head != 0)
    throw CLI::ValidationError("--n-head", "must divide --n-embd (" + std::to_string(shape.n_embd) + ")");
}

}  // namespace tandem::app
