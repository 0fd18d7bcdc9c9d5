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
  app.add_option("--n-layer", g.n_layer, "gpt: transformer blocks")->check(kPositive)->capture_default_str();
  app.add_option("--n-head", g.n_head, "gpt: attention heads (must divide --n-embd)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--n-embd", g.n_embd, "gpt: width")->check(kPositive)->capture_default_str();
  app.add_option("--context", g.context, "gpt: tokens per sequence")->check(kPositive)->capture_default_str();
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

void apply_gpt_defaults(const CLI::App& app, TrainConfig& cfg) {
  if (cfg.model != "gpt") {
    for (const char* flag : kGptOnly)
      if (given(app, flag)) throw CLI::ValidationError(flag, "only applies to --model gpt");
    return;
  }
  const GptRunConfig& g = cfg.gpt;
  if (!g.init_from.empty())
    for (const char* flag : {"--n-layer", "--n-embd", "--context"})
      if (given(app, flag)) throw CLI::ValidationError(flag, "--init-from takes the shape from its file");
  if (g.init_from.empty() && g.n_embd % g.n_head != 0)
    throw CLI::ValidationError("--n-head", "must divide --n-embd (" + std::to_string(g.n_embd) + ")");
  if (!given(app, "--batch-size")) cfg.batch_size = 8;
  if (!given(app, "--eval-batch-size")) cfg.eval_batch_size = 32;
  if (!given(app, "--optimizer")) cfg.optimizer.type = "adamw";
  if (!given(app, "--lr")) cfg.optimizer.learning_rate = 1e-3;
  if (!given(app, "--weight-decay")) cfg.optimizer.weight_decay = 0.1;
  if (!given(app, "--warmup-steps")) cfg.schedule.warmup_steps = 50;
  if (!given(app, "--grad-clip")) cfg.grad_clip = 1.0;
}

}  // namespace tandem::app
