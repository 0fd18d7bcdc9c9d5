// --save-onnx at the end of a run: the model the run evaluated and reported, written as ONNX.
#pragma once
#include <string>

#include "nn/module.h"
#include "train/logging.h"
#include "train/train_features.h"

namespace tandem::app {

// Writes `model` (the trainer's bare model, its parameters gathered) to `path` on the calling rank;
// with --ema, its average's weights (what the run evaluated with), swapped in for the export and
// back out after, so the exported model is the one whose accuracy or loss the run reported.
void save_evaluated_onnx(const train::FullTrainer& trainer, nn::Module& model, const std::string& path,
                         const train::Logger& log);

}  // namespace tandem::app
