// TrainConfig: every setting of a training run, filled from the command line (cli.h) and read by
// the Trainer. New features add a field here and a flag in cli.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/data/dataset.h"

namespace tandem::app {

struct TrainConfig {
  // model and data
  std::string model = "mlp";  // mlp | cnn
  std::string data_dir = data::kFashionMnistDir;
  // optimisation (the README defaults: they reach mlp >= 0.88 and cnn >= 0.91 in 5 epochs)
  int64_t epochs = 5;
  int64_t batch_size = 128;   // per process
  double lr = 0.05;
  double momentum = 0.9;
  std::string optimizer = "sgd";  // sgd | adam | adamw
  double weight_decay = 5e-4;
  std::string lr_schedule = "cosine";  // cosine (per step, to 0 at the last step) | constant
  uint64_t seed = 0;
  // execution
  int threads = 0;          // Eigen/OpenMP threads; 0 keeps OpenMP's default
  int64_t max_steps = 0;    // stop after this many optimizer steps (0: no limit)
  bool eval = true;         // evaluate on the test split after every epoch
  int64_t eval_batch_size = 256;
  std::string metrics_path;  // JSON lines; empty: none
  bool quiet = false;        // no per-epoch lines

  // Seams for later work (filled by their flags when they land):
  //   mode (single | ddp | dp), amp dtype and GradScaler settings, checkpoint save/resume paths,
  //   EMA decay. The Trainer reads them through TrainerCallbacks (trainer.h).
};

}  // namespace tandem::app
