// The state of a training run as one checkpoint (runtime/serialization/training_checkpoint.h):
// TrainComponents (model, optimizer, scaler, scheduler, EMA, generator) + TrainProgress (step,
// epoch, sampler position) -> save_training_state / load_training_state.
//
// Resume is bitwise: the checkpoint holds the weights, every optimizer moment and step count (and
// f32 master copies), the scaler's scale and growth tracker, the LR schedule's epoch, the EMA
// shadows, the default Generator's Philox offset (dropout masks continue where they stopped) and
// the sampler position (global samples of the epoch consumed; with the same global batch a
// different world size resumes at the same sample: rank r skips sampler_position / world_size of
// its DistributedSampler shard, whose entries are dealt r, r+N, ...).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "nn/amp/grad_scaler.h"
#include "nn/ema.h"
#include "nn/module.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"
#include "runtime/random.h"
#include "runtime/serialization/training_checkpoint.h"

namespace tandem::nn {

struct TrainComponents {
  Module* model = nullptr;          // the bare model (DDP: ParallelSetup::inner)
  Optimizer* optimizer = nullptr;
  GradScaler* scaler = nullptr;     // optional
  LRScheduler* scheduler = nullptr; // optional
  EMA* ema = nullptr;               // optional
  Generator* generator = nullptr;   // default_generator() when null
};

struct TrainProgress {
  int64_t step = 0;              // optimizer steps taken
  int64_t epoch = 0;             // the epoch in progress
  int64_t sampler_position = 0;  // global samples of `epoch` consumed (a multiple of global_batch)
  int64_t global_batch = 0;
  int64_t world_size = 1;
  std::map<std::string, std::string> strings;  // config echo, e.g. {"amp": "bf16", "model": "cnn"}
};

// Rank 0 only (others should wait at a barrier after it). Returns the checkpoint's directory.
std::string save_training_state(const std::string& dir, const TrainComponents& c, const TrainProgress& p,
                                const serialization::CheckpointOptions& options = {});
// Every rank. Restores everything in `c` (all present components must be in the checkpoint and
// vice versa) and returns the progress. The generator keeps its seed (each rank's own); its Philox
// offset is restored. A different world size is accepted when the global batch is kept.
TrainProgress load_training_state(const std::string& path, const TrainComponents& c,
                                  int64_t expected_global_batch = 0);
// The same from a checkpoint already read (e.g. broadcast from rank 0: train/checkpoint_broadcast.h).
TrainProgress load_training_state(const serialization::LoadedCheckpoint& checkpoint, const TrainComponents& c,
                                  int64_t expected_global_batch = 0);

}  // namespace tandem::nn
