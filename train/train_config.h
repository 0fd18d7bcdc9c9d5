// TrainConfig: every setting of a training run, filled from the command line (cli.h) and read by
// the Trainer. New features add a field here and a flag in cli.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "train/gpt_config.h"
#include "nn/config/run_config.h"
#include "nn/parallel/ddp_options.h"
#include "runtime/data/dataset.h"

namespace tandem::train {

struct TrainConfig {
  // model and data
  std::string model = "mlp";  // a registered type tandem-train trains (nn/model_registry.h): mlp, cnn, gpt, ...
  // --config's model block when it describes a registered model other than mlp, cnn and gpt (their
  // own shapes are tandem-train's); empty: the type's defaults (nn::default_model_config).
  std::optional<nn::config::ModelConfig> model_config;
  std::string data_dir = data::kFashionMnistDir;
  GptRunConfig gpt;           // --model gpt: shape, text, validation, sample (gpt_config.h)
  // optimisation (the README defaults: they reach mlp >= 0.88 and cnn >= 0.91 in 5 epochs)
  int64_t epochs = 5;
  int64_t batch_size = 128;   // per process
  int64_t global_batch_size = 0;  // > 0: batch_size = this / ranks (an error where it does not divide)
  // --optimizer sgd|adam|adamw, --lr, --momentum, --weight-decay; a --config file sets the rest
  // (betas, eps, dampening, nesterov, fused). Built by nn::config::build_optimizer.
  nn::config::OptimizerConfig optimizer = default_optimizer();
  std::string lr_schedule = "cosine";  // cosine (per step, to 0 at the last step) | step | constant
  // --lr-step-size, --lr-gamma (step) and --warmup-steps (linear warmup before any schedule); type unused
  nn::config::ScheduleConfig schedule;
  bool lr_scale_with_world = false;  // --lr-scale-with-world: the linear scaling rule (lr x world size)
  uint64_t seed = 0;
  // A schedule from --config (step, cosine_annealing over its T_max, linear_warmup): replaces lr_schedule.
  std::optional<nn::config::ScheduleConfig> lr_scheduler;
  std::string config_path;  // --config: a run-config YAML file; flags given on the command line override it
  // execution
  std::string device = "auto";  // auto | cpu | cuda | cuda:N (auto: cuda:<local rank> where each rank has a GPU)
  int threads = 0;          // Eigen/OpenMP threads; 0 keeps OpenMP's default
  int64_t max_steps = 0;    // stop after this many optimizer steps (0: no limit)
  bool eval = true;         // evaluate on the test split after every epoch
  int64_t eval_batch_size = 256;
  std::string metrics_path;  // JSON lines; empty: none
  int64_t metrics_every = 0;  // a "step" record every N steps in metrics_path (0: epochs only)
  bool quiet = false;        // no per-epoch lines
  // issue 18's loop (apps/common/loop_flags.cpp): logging, progress, the memory budget
  std::string log_level = "info";  // trace | debug | info | warn | error | off
  std::string progress = "auto";   // auto (bar on a terminal, else lines) | bar | lines | off
  int64_t progress_every = 0;      // plain progress lines every N steps (0: about ten per epoch)
  std::string trace_path;          // --trace FILE: the Chrome trace JSON of all ranks (empty: off)
  std::string memory_limit;        // tensor-memory budget of the run's device, e.g. "96MB" (empty: none)

  // data parallelism (train/parallel_setup.h)
  std::string mode;          // auto (or empty: train/mode_auto.h) | single | ddp | dp
  std::string mode_reason;   // why the mode was chosen (the done record's mode_reason)
  std::string devices;       // dp: "cpu:0,cpu:1" or "cuda:0,cuda:1"
  bool sync_bn = false;      // ddp: BatchNorm -> SyncBatchNorm
  int64_t accumulation_steps = 1;  // micro-batches per optimizer step
  nn::parallel::DDPOptions ddp;    // ddp: --bucket-cap-mb, --find-unused-parameters, ...
  // mixed precision, clipping, activation checkpointing, EMA, checkpoints (train/amp_config.h, nn/training_state.h)
  std::string amp = "off";   // off | f16 | bf16
  double grad_clip = 0;      // max global gradient norm (0: no clipping)
  int checkpoint_activations = 0;  // segments of checkpoint_sequential (0: off)
  double ema_decay = 0;      // 0: no EMA; otherwise evaluation uses the EMA weights
  std::string save_dir;      // checkpoints go to save_dir/step-N
  int64_t save_every = 0;    // optimizer steps between checkpoints (0: only at the end)
  std::string resume_dir;    // a save_dir/step-N folder to continue from
  bool stop_on_nonfinite = true;  // a nan/inf loss stops the run (train/nonfinite_guard.h)
  // operations (apps/common/operations.h, docs/operations.md)
  std::string min_free_memory = "0";  // --device auto: skip GPUs with less free memory ("2GB")
  int status_port = -1;               // rank 0 serves /health, /status, /metrics (0: a free port; -1: off)
  std::string status_bind = "127.0.0.1";
  double monitor_period = 1.0;        // seconds between host/GPU samples with --status-port (0: none)

  // SGD at lr 0.05, momentum 0.9, weight decay 5e-4; torch's defaults for what has no flag.
  static nn::config::OptimizerConfig default_optimizer() {
    nn::config::OptimizerConfig o;
    o.type = "sgd";
    o.learning_rate = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 5e-4;
    return o;
  }
};

}  // namespace tandem::train
