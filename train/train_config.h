// TrainConfig: every setting of a training run, filled from a --config file and the command line
// (apps/common/cli.h) or by a program, and read by the Trainer. New features add a field here and a
// flag in cli.cpp (and a key in nn/config's parser where it belongs to a run-config block).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "train/gpt_config.h"
#include "train/logging.h"
#include "train/parallel_mode.h"
#include "nn/config/run_config.h"
#include "runtime/enum_names.h"

namespace tandem::train {

// --progress (train/progress.h).
enum class ProgressStyle { Auto, Bar, Lines, Off };

// One run's settings. The model, loss, optimizer, schedule, training and ddp blocks are the run
// config's (nn/config/run_config.h): a --config file is read onto them and the flags then write the
// same fields, so a setting lives in one field, whoever sets it. The rest is the loop's.
struct TrainConfig : nn::config::RunConfig {
  TrainConfig();  // tandem-train's defaults (train_config.cpp)

  // model and data: `model` (RunConfig) is a registered type tandem-train trains (mlp, cnn, gpt, ...)
  // with its parameters; a gpt's shape is model.gpt.
  std::string data_dir;       // Fashion-MNIST's IDX files (default: Debian's fashion-mnist package's folder)
  // --data: the user's arrays instead (runtime/data/array_file.h, train/array_batches.h)
  std::string data_file;             // .npy, .npz, .h5 or .hdf5 (empty: Fashion-MNIST or text)
  std::vector<std::string> data_inputs{"x"};  // the model's input arrays, in order
  std::string data_labels = "y";     // the target array
  std::string val_data_file;         // validation arrays of the same names (empty: none, or val_fraction)
  double val_fraction = 0;           // else the last fraction of data_file's rows validates (0: no validation)
  GptRunConfig gpt;           // --model gpt: text, validation, sample (gpt_config.h)
  // optimisation (the README defaults: they reach mlp >= 0.88 and cnn >= 0.91 in 5 epochs)
  int64_t epochs = 5;
  int64_t batch_size = 128;   // per process
  int64_t global_batch_size = 0;  // > 0: batch_size = this / ranks (an error where it does not divide)
  bool lr_scale_with_world = false;  // --lr-scale-with-world: the linear scaling rule (lr x world size)
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
  logging::Level log_level = logging::Level::info;
  ProgressStyle progress = ProgressStyle::Auto;  // auto: a bar on a terminal, else lines
  int64_t progress_every = 0;      // plain progress lines every N steps (0: about ten per epoch)
  std::string trace_path;          // --trace FILE: the Chrome trace JSON of all ranks (empty: off)
  std::string memory_limit;        // tensor-memory budget of the run's device, e.g. "96MB" (empty: none)

  // data parallelism (train/parallel_setup.h)
  ParallelMode mode = ParallelMode::Auto;  // auto: train/mode_auto.h decides
  std::string mode_reason;   // why the mode was chosen (the done record's mode_reason)
  std::string devices;       // dp: "cpu:0,cpu:1" or "cuda:0,cuda:1"
  bool sync_bn = false;      // ddp: BatchNorm -> SyncBatchNorm
  // accumulation_steps, grad_clip, amp, seed, ddp: RunConfig's training and ddp blocks
  int checkpoint_activations = 0;  // segments of checkpoint_sequential (0: off)
  double ema_decay = 0;      // 0: no EMA; otherwise evaluation uses the EMA weights
  std::string save_dir;      // checkpoints go to save_dir/step-N
  int64_t save_every = 0;    // optimizer steps between checkpoints (0: only at the end)
  std::string resume_dir;    // a save_dir/step-N folder to continue from
  std::string save_onnx;     // the trained model as ONNX here at the end (rank 0; nn/onnx/onnx_export.h)
  bool stop_on_nonfinite = true;  // a nan/inf loss stops the run (train/nonfinite_guard.h)
  // operations (apps/common/operations.h, docs/operations.md)
  std::string min_free_memory = "0";  // --device auto: skip GPUs with less free memory ("2GB")
  int status_port = -1;               // rank 0 serves /health, /status, /metrics (0: a free port; -1: off)
  std::string status_bind = "127.0.0.1";
  double monitor_period = 1.0;        // seconds between host/GPU samples with --status-port (0: none)

  // The defaults of `type` for what its model sets differently (gpt: batch 8, adamw at 1e-3 with
  // weight decay 0.1, 50 warmup steps, clipping at 1): applied when the model is chosen, before a
  // file and the flags.
  void apply_model_defaults(const std::string& type);
};

}  // namespace tandem::train

namespace tandem {
template <>
struct EnumNames<train::ProgressStyle> {
  static constexpr std::pair<train::ProgressStyle, const char*> words[] = {{train::ProgressStyle::Auto, "auto"},
                                                                           {train::ProgressStyle::Bar, "bar"},
                                                                           {train::ProgressStyle::Lines, "lines"},
                                                                           {train::ProgressStyle::Off, "off"}};
};
}  // namespace tandem
