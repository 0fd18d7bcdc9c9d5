// Builds what a TrainConfig names: the model, the optimizer; applies the thread count; and the
// top-level guard that turns tandem::Error into a message and a non-zero exit.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "train/train_config.h"
#include "nn/gpt.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace tandem::train {

// The model named by cfg.model, initialised from a generator seeded with cfg.seed.
std::shared_ptr<nn::Module> make_model(const TrainConfig& cfg);
// --model gpt's shape (cfg.model.gpt) with the byte vocabulary (256).
nn::GPTConfig gpt_model_config(const TrainConfig& cfg);
// cfg.optimizer: sgd (momentum, L2 weight decay), adam (L2) or adamw (decoupled); fused when a
// --config file asks for it (nn::config::build_optimizer).
std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params);

// Runs body; a tandem::Error (or another std::exception) is printed to stderr as
// "<program>: error: <message>" and gives exit code 1. Only apps/ catch.
int run_guarded(const char* program, const std::function<int()>& body);

}  // namespace tandem::train
