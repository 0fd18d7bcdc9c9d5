// Model and optimizer construction from the config; the error guard.
#include "train/factory.h"

#include <algorithm>
#include <cstdio>

#include "train/logging.h"
#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/gpt_hf.h"
#include "nn/layers/sequential.h"
#include "nn/model_registry.h"
#include "runtime/data/bpe_tokenizer.h"
#include "runtime/error.h"
#include "runtime/random.h"

namespace tandem::train {

nn::GPTConfig gpt_model_config(const TrainConfig& cfg) {
  nn::GPTConfig c = cfg.model.gpt;
  c.vocab_size = 256;  // byte-level tokens (make_model pads a tokenizer's vocabulary instead)
  return c;
}

std::shared_ptr<nn::Module> make_model(const TrainConfig& cfg) {
  Generator gen(cfg.seed);
  if (cfg.model.type == "gpt") {
    const auto padded = [](int64_t v) { return (v + 63) / 64 * 64; };  // GPT-2: 50257 -> 50304
    // --tokenizer: its vocabulary (the run reads the files again to encode the text).
    const int64_t tokens =
        cfg.gpt.tokenizer.empty() ? 0 : data::BpeTokenizer::from_dir(cfg.gpt.tokenizer).vocab_size();
    if (cfg.gpt.init_from.empty()) {
      nn::GPTConfig c = gpt_model_config(cfg);
      if (tokens > 0) c.vocab_size = padded(tokens);
      return std::make_shared<nn::GPT>(c, gen);
    }
    nn::GPTConfig c = nn::hf_gpt2_config(cfg.gpt.init_from, cfg.model.gpt.n_head);
    TANDEM_CHECK(tokens == 0 || c.vocab_size == tokens || c.vocab_size == padded(tokens),
                 "--init-from {} has a vocabulary of {} tokens, the tokenizer in {} has {}: they must be the same "
                 "(the tokenizer the weights were trained with)",
                 cfg.gpt.init_from, c.vocab_size, cfg.gpt.tokenizer, tokens);
    c.vocab_size = padded(std::max<int64_t>(c.vocab_size, tokens > 0 ? tokens : 256));  // without one: bytes fit
    auto gpt = std::make_shared<nn::GPT>(c, gen);
    nn::load_hf_gpt2(*gpt, cfg.gpt.init_from);
    return gpt;
  }
  // The registry's builder (cnn fuses its BatchNorm epilogues: same names and results, fewer passes).
  return nn::config::build_model(cfg.model, gen);
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params) {
  // The run config's builder: the flags' optimizers and a --config file's are made in one place.
  return nn::config::build_optimizer(cfg.optimizer, params);
}

int run_guarded(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    // The source location only where it helps us, not the user: --log-level debug (or trace).
    if (!e.where().empty() && logging::enabled(logging::Level::debug))
      std::fprintf(stderr, "%s: error: %s (thrown at %s)\n", program, e.what(), e.where().c_str());
    else
      std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", program, e.what());
  }
  return 1;
}

}  // namespace tandem::train
