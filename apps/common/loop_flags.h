// The flags of issue 18 (DDP and optimizer options, schedules, and the self-managing loop's settings),
// registered beside add_train_flags: each binds to the library's own config field.
#pragma once
#include "apps/common/engine.h"
#include <CLI/CLI.hpp>

#include "train/metrics.h"
#include "train/parallel_setup.h"
#include "train/train_config.h"
#include "nn/optim/optimizer.h"

namespace tandem::app {

// --log-level, --progress-every, --memory-limit.
void add_loop_flags(CLI::App& app, TrainConfig& cfg);
// --lr-step-size, --lr-gamma, --warmup-steps, --lr-scale-with-world, --fused.
void add_schedule_flags(CLI::App& app, TrainConfig& cfg);
// --find-unused-parameters, --gradient-as-bucket-view, --static-graph, --no-broadcast-buffers.
void add_ddp_flags(CLI::App& app, TrainConfig& cfg);

// After the world is known (every rank): the log level and rank prefix, the memory budget of the
// run's device kind; then rank 0 logs the budget.
void apply_loop_settings(const TrainConfig& cfg, const ParallelSetup& ps, Device device, const Logger& log);

// One line of what these flags set, as the library objects hold it (the optimizer's type, the
// schedule, the lr after scaling, the DDP object's options): the proof that each flag arrived.
void log_loop_options(const Logger& log, const TrainConfig& cfg, const ParallelSetup& ps, const nn::Optimizer& opt);

}  // namespace tandem::app
