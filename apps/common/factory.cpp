// Model and optimizer construction from the config; threads; the error guard.
#include "apps/common/factory.h"

#include <omp.h>

#include <cstdio>

#include "nn/layers/sequential.h"
#include "nn/models.h"
#include "runtime/error.h"
#include "runtime/random.h"

namespace tandem::app {

std::shared_ptr<nn::Module> make_model(const TrainConfig& cfg) {
  Generator gen(cfg.seed);
  auto model = nn::make_model(cfg.model, gen);
  model->fuse_batchnorm_epilogues();  // same names and results, fewer passes over the activations
  return model;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params) {
  if (cfg.optimizer == "sgd") {
    nn::SGDOptions o;
    o.lr = cfg.lr;
    o.momentum = cfg.momentum;
    o.weight_decay = cfg.weight_decay;
    return std::make_unique<nn::SGD>(params, o);
  }
  nn::AdamOptions o;
  o.lr = cfg.lr;
  o.weight_decay = cfg.weight_decay;
  if (cfg.optimizer == "adam") return std::make_unique<nn::Adam>(params, o);
  if (cfg.optimizer == "adamw") return std::make_unique<nn::AdamW>(params, o);
  TANDEM_FAIL(Value, "unknown optimizer '{}'; choose sgd, adam or adamw", cfg.optimizer);
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
