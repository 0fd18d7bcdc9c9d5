// tandem-train --model gpt: a GPT trained on text (runtime/data/text_corpus.h) as bytes or, with
// --tokenizer, GPT-2 BPE tokens (runtime/data/bpe_tokenizer.h) by the FullTrainer (DDP,
// accumulation, bf16, clipping, checkpoints, exact resume), with validation losses every
// --eval-every steps ("eval" metrics records, val_loss in nats per byte or per token, as their
// loss_unit says) and a text sample printed by rank 0 at the end.
#pragma once
#include "apps/common/engine.h"
#include <memory>
#include <vector>

#include "train/parallel_setup.h"
#include "train/train_config.h"
#include "nn/optim.h"

namespace tandem::app {

// The run's optimizer with nanoGPT's decay groups: weight decay on every parameter with >= 2 dims
// (the matrices and the embeddings, the tied wte among them), none on biases and LayerNorm weights;
// for every optimizer type, fused or not (nn::config::DecayOn::Matrices).
std::unique_ptr<nn::Optimizer> make_gpt_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params);

// The run from the parallel setup on `device` (collective under ddp), with the services every run
// has (run_services.h). Returns the exit code.
int train_gpt(const TrainConfig& cfg, ParallelSetup ps, Device device);

}  // namespace tandem::app
