// Model and optimizer construction from the config; threads; the error guard.
#include "apps/common/factory.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/gpt_hf.h"
#include "nn/layers/sequential.h"
#include "nn/models.h"
#include "runtime/error.h"
#include "runtime/random.h"

namespace tandem::app {

nn::GPTConfig gpt_model_config(const TrainConfig& cfg) {
  nn::GPTConfig c;  // vocab 256: byte-level tokens
  c.n_layer = cfg.gpt.n_layer;
  c.n_head = cfg.gpt.n_head;
  c.n_embd = cfg.gpt.n_embd;
  c.context = cfg.gpt.context;
  return c;
}

std::shared_ptr<nn::Module> make_model(const TrainConfig& cfg) {
  Generator gen(cfg.seed);
  if (cfg.model == "gpt") {
    if (cfg.gpt.init_from.empty()) return std::make_shared<nn::GPT>(gpt_model_config(cfg), gen);
    nn::GPTConfig c = nn::hf_gpt2_config(cfg.gpt.init_from, cfg.gpt.n_head);
    c.vocab_size = (std::max<int64_t>(c.vocab_size, 256) + 63) / 64 * 64;  // bytes fit; GPT-2: 50257 -> 50304
    auto gpt = std::make_shared<nn::GPT>(c, gen);
    nn::load_hf_gpt2(*gpt, cfg.gpt.init_from);
    return gpt;
  }
  auto model = nn::make_model(cfg.model, gen);
  model->fuse_batchnorm_epilogues();  // same names and results, fewer passes over the activations
  return model;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params) {
  // The run config's builder: the flags' optimizers and a --config file's are made in one place.
  return nn::config::build_optimizer(cfg.optimizer, params);
}

int apply_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  return omp_get_max_threads();
}

int run_guarded(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", program, e.what());
  }
  return 1;
}

}  // namespace tandem::app
